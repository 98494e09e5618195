package component

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// lockState is where a Lock is in its life; guarded by Mutex.mu.
type lockState uint8

const (
	stateHeld lockState = iota
	stateReleasing
	stateReleased
	stateLost
)

// Lock is a lock held by a Mutex. Its methods are safe for concurrent use.
//
// A Lock's Context is cancelled when the lock ends: with a cause wrapping
// ErrLost when it is lost, ErrReleased when it is released, ErrClosed when
// the Mutex closed. The work a lock protects should watch it: losing a lock
// does not interrupt anything by itself.
type Lock struct {
	m          *Mutex
	key        string // the Mutex's prefix and the name (Lock.name)
	token      string
	fence      uint64
	acquiredAt time.Time

	// Guarded by m.mu.
	state     lockState
	seq       uint64
	ttl       time.Duration
	due       time.Time // next renewal
	expiry    time.Time // tracked expiry: last successful call start + ttl - drift
	failures  int       // consecutive failed renewals
	renewedAt time.Time // start of the last successful acquire/extend/renew call
	cause     error     // why it ended (or is ending: releasing)
	// inflight is closed when the renewal or Extend in flight for this
	// lock ends; nil when none is. One at a time: the store applies them
	// in the order they were sent, so the last one's ttl is the store's.
	inflight chan struct{}
	ctx      *lockContext              // Context's, made on first use
	runs     []context.CancelCauseFunc // fn contexts of Run, ended with ctx
	// handedTo is the waiter a handover gave this lock to, until it
	// takes it (handover.go).
	handedTo *waiter
	// traced carries the sampled span of the Acquire that got the lock,
	// for the hold's exemplar; nil when it had none (telemetry.go).
	traced context.Context
}

// Name returns the lock's name, without the store's prefix.
func (l *Lock) Name() string { l.mustLock(); return l.name() }

// name is the lock's name: its key without the Mutex's prefix, not kept
// apart, which keeps a Lock in a smaller allocation class.
func (l *Lock) name() string {
	if l.m == nil { // a Lock not made by a Mutex, printed
		return l.key
	}
	return l.key[len(l.m.opts.Prefix):]
}

// Key returns the lock's key in the store: the Mutex's prefix and the name.
func (l *Lock) Key() string { l.mustLock(); return l.key }

// Token returns the token that identifies this holder in the store: 130
// random bits and the holder's identity (see ParseHolder).
func (l *Lock) Token() string { l.mustLock(); return l.token }

// Fence returns the fencing token: it grows with every acquisition of the
// lock in the store, so that a store of the protected data can refuse the
// writes of an older holder. Zero only for stores without fencing.
func (l *Lock) Fence() uint64 { l.mustLock(); return l.fence }

// AcquiredAt returns when the lock was acquired (the start of the attempt
// that got it).
func (l *Lock) AcquiredAt() time.Time { l.mustLock(); return l.acquiredAt }

// Held reports whether the lock is still held: not released, not lost, and
// not past its tracked expiry.
func (l *Lock) Held() bool {
	l.mustLock()
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	l.m.expireLocked(l, time.Now())
	return l.state == stateHeld
}

// Context returns a context cancelled when the lock ends; its cause
// (context.Cause) tells why: ErrLost (wrapped), ErrReleased or ErrClosed.
//
// Its Err also checks the lock's tracked expiry (see expiry.go): past it,
// the lock ends as lost there and then, even if the timer that would end it
// has not fired yet. context.Cause does not check it (nor does Done, which
// the timer closes): ask Err first — if ctx.Err() != nil, then
// context.Cause(ctx) — or use Lock.Err, which checks and tells why.
// Contexts derived from it see the lock end only when the timer fires:
// check Lock.Err just before each write the lock protects.
func (l *Lock) Context() context.Context {
	l.mustLock()
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.ctx == nil {
		// Created on first use: most locks are released without anyone
		// asking for their context.
		ctx, cancel := context.WithCancelCause(context.Background())
		l.ctx = &lockContext{Context: ctx, l: l, cancel: cancel}
		if l.cause != nil {
			cancel(l.cause)
		}
	}
	return l.ctx
}

// Done returns a channel closed when the lock ends.
func (l *Lock) Done() <-chan struct{} { return l.Context().Done() }

// Err returns nil while the lock is held, then why it ended: an error
// wrapping ErrLost, ErrReleased or ErrClosed.
func (l *Lock) Err() error {
	l.mustLock()
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	l.m.expireLocked(l, time.Now())
	return l.cause
}

// Release releases the lock in the store. It reports true when this call
// released it, false when it was already released, lost or expired in the
// store. When a caller of this Mutex waits for the name and the store can
// hand the lock over (see handover.go), it is handed to that caller in the
// same operation, with a new token and fence. A store failure is returned
// as a *DriverError; the lock is then no longer renewed and expires in the
// store after its ttl. A ctx that has already ended (a deferred Release
// after its request ended) does not stop the release: it then runs bounded
// by a second, since a lock left behind would be in everyone's way.
func (l *Lock) Release(ctx context.Context) (bool, error) {
	l.mustLock()
	mustCtx(ctx)
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), attemptGrace)
		defer cancel()
	}
	ctx, span := l.m.tel.start(ctx, spanRelease)
	ok, err := l.release(ctx)
	if span.IsRecording() {
		span.SetAttributes(AttrFence.Int64(int64(l.fence)), attribute.Bool("mutexfx.released", ok))
		l.m.tel.endSpan(span, l.name(), err)
	}
	return ok, err
}

// release is Release's work, ctx bounded.
func (l *Lock) release(ctx context.Context) (bool, error) {
	m := l.m
	m.mu.Lock()
	if l.state != stateHeld {
		m.mu.Unlock()
		return false, nil
	}
	l.releasing(ErrReleased)
	w := m.handoverTarget(l)
	m.calls++ // Close waits for it (l was held: Close has not started)
	m.mu.Unlock()
	if w != nil {
		defer m.endCall()
		return m.handover(ctx, l, w)
	}

	ok, err := m.drv.Release(ctx, l.key, l.token)

	m.mu.Lock()
	m.end(l, stateReleased, ErrReleased)
	m.endCallLocked()
	m.mu.Unlock()
	if err != nil {
		return false, m.driverError("release", l.name(), err)
	}
	return ok, nil
}

// releasing marks l as being released for cause and cancels its context
// at once: its holder is done with it, and its context must not outlive
// the lock while the store is slow to answer the release. m.mu held.
func (l *Lock) releasing(cause error) {
	l.state, l.cause = stateReleasing, cause
	l.cancelContexts(cause)
}

// finish records that l ended, as state for cause, and cancels its
// context; it reports false when l had ended already. m.mu held.
func (l *Lock) finish(state lockState, cause error) bool {
	if l.state == stateReleased || l.state == stateLost {
		return false
	}
	l.state, l.cause = state, cause
	delete(l.m.late, l)
	l.m.tel.ended(l, cause)
	l.cancelContexts(cause)
	return true
}

// cancelContexts ends the lock's context and those of Run, for cause;
// m.mu held.
func (l *Lock) cancelContexts(cause error) {
	if l.ctx != nil {
		l.ctx.cancel(cause)
	}
	for _, cancel := range l.runs {
		cancel(cause)
	}
	l.runs = nil
}

// Extend sets the lock's time to live to ttl from now (and keeps renewing it
// with that ttl). It reports false when the lock was no longer held — it is
// then lost. A store failure is returned as a *DriverError; the store may
// have applied the new ttl or not (or may apply it later), so the lock's
// tracked expiry becomes the earlier of the two, and it is renewed with
// the shorter of the two ttls from then on. A failed request may still
// reach the store after a later Extend to a longer ttl succeeded: until it
// can no longer land (its call's deadline), the lock is renewed every
// third of the failed request's ttl, and its tracked expiry counts with
// that ttl (late.go). Calls to Extend and the renewals of the lock reach
// the store one at a time.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	l.mustLock()
	mustCtx(ctx)
	if err := checkTTL(ttl); err != nil {
		return false, err
	}
	m := l.m
	if err := m.checkMinTTL(ttl); err != nil {
		return false, err
	}
	m.mu.Lock()
	for l.state == stateHeld && l.inflight != nil {
		ch := l.inflight
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false, context.Cause(ctx)
		}
		m.mu.Lock()
	}
	if l.state != stateHeld {
		m.mu.Unlock()
		return false, nil
	}
	done := make(chan struct{})
	l.inflight = done
	m.calls++ // Close waits for it (l is held: Close has not started)
	// The renewals wait for this call: bounded as a renewal is
	// (renewContext), a call hung on a dead connection fails in time for
	// a renewal before the expiry, and an answer after the expiry comes
	// too late anyway (the lock is lost then).
	cctx, cancel := context.WithDeadline(ctx, minTime(l.expiry, time.Now().Add(max(l.ttl/3, attemptGrace))))
	defer cancel()
	deadline, _ := cctx.Deadline()
	m.mu.Unlock()

	start := time.Now()
	ok, err := m.drv.Extend(cctx, l.key, l.token, ttl)

	m.mu.Lock()
	m.endCallLocked()
	l.inflight = nil
	close(done)
	held := l.state == stateHeld
	switch {
	case err != nil && held:
		// The store may have applied ttl, or may yet apply it: the
		// request can reach it after later ones (another connection's).
		// Renew at once, and from now on with the shorter of the two
		// ttls, so that ttl landing late never leaves the store keeping
		// the lock for less than is tracked; lose it by the earlier
		// expiry if that fails too.
		l.expiry = minTime(l.expiry, start.Add(ttl-drift(ttl)))
		l.ttl = min(l.ttl, ttl)
		m.mayLand(l, ttl, callEnd(deadline))
		l.due = time.Now()
		m.wakeFor(l)
	case err != nil:
	case !held:
		ok = false
	case !ok:
		m.lose(l, CauseGoneOrTaken, "extend found it gone or taken")
	default:
		l.ttl = ttl
		m.renewed(l, start)
	}
	m.mu.Unlock()
	if err != nil {
		return false, m.driverError("extend", l.name(), err)
	}
	return ok, nil
}

// lockKey is the context key of the lock attached by Do.
type lockKey struct{}

// LockFrom returns the lock that Do (or an adapter built on it, such as the
// HTTP middleware) attached to ctx, or nil.
func LockFrom(ctx context.Context) *Lock {
	l, _ := ctx.Value(lockKey{}).(*Lock)
	return l
}

// WithLock returns a copy of ctx carrying l, for LockFrom.
func WithLock(ctx context.Context, l *Lock) context.Context {
	return context.WithValue(ctx, lockKey{}, l)
}
