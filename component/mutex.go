// Package component is the mutexfx lock component: a Mutex hands out named
// locks held in a store (memory, lock files, Redis, PostgreSQL, MySQL),
// waits for them in FIFO order, renews them while they are held and signals
// their loss.
//
// It is usable without fx: build one with New and close it with Close.
package component

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/backoff"
	"go.uber.org/zap"
)

// Mutex hands out named locks held in one store. It is safe for concurrent
// use. Locks are not reentrant: acquiring a lock this Mutex already holds
// waits for its release like any other holder. Waiters for one name are
// served in arrival order, and only the first of them talks to the store.
//
// Unlike sync.Mutex, the zero Mutex is not usable (it has no store): build
// one with New; the methods of one New did not build panic with "mutexfx:
// Mutex used without New". A nil ctx, or a method of a nil *Lock, panics
// naming the mistake too (misuse.go).
type Mutex struct {
	opts    Options
	drv     drivers.Driver
	feat    drivers.Features
	renewer drivers.Renewer
	handoff drivers.Handoverer // nil: the driver cannot hand a lock over
	log     *zap.Logger
	ident   string // the tokens' holder suffix (identity.go)
	tel     *telemetry

	// bg is cancelled by Close once the locks are released; renewals use
	// it. closing is cancelled as Close starts; store attempts and the
	// subscription use it.
	bg            context.Context
	bgCancel      context.CancelFunc
	closing       context.Context
	closingCancel context.CancelFunc
	// cleanups bounds background releases; cancelled when Close's ctx
	// ends, or after Close.
	cleanups       context.Context
	cleanupsCancel context.CancelFunc
	wg             sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	closeDone chan struct{} // closed when the first Close has finished
	closeErr  error         // its result, written before closeDone closes
	draining  bool          // Close waits for wg: no new background work
	calls     int           // store calls in flight that Close waits for (close.go)
	settled   chan struct{} // closed when calls drops to 0 after Close
	started   bool
	queues    map[string]*queue
	held      map[string]*Lock
	// attempts are the tokens of the acquisitions and handovers in flight,
	// true once the store reported them lost (early.go); tracking tells
	// whether they are tracked at all.
	attempts map[string]bool
	tracking bool
	inflight *attemptCtx // the store attempts in flight, linked (attemptctx.go)
	seq      uint64
	timer    *time.Timer // wakes the scheduler at nextWake
	stop     chan struct{}
	nextWake time.Time // when the scheduler looks next
	// late holds the failed requests of held locks that may still reach
	// the store (late.go): rare, kept out of Lock.
	late map[*Lock]lateWindow

	// A queue and a waiter kept for the next acquisition (queue.go);
	// guarded by mu.
	spareQueue  *queue
	spareWaiter *waiter

	// Subscribing to the store's events (subscribe.go); guarded by mu.
	subbed   bool // subscribed, or nothing to subscribe to
	subbing  bool // a subscription is under way
	subRetry time.Time
	subSince time.Time // when the last subscription was in place
	unsub    func()
}

// New builds a Mutex. It connects nothing: the store is reached at the first
// acquisition. Invalid options return an *OptionError naming the field.
func New(opts Options) (*Mutex, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Mutex{
		opts:   opts,
		drv:    opts.Driver,
		feat:   drivers.FeaturesOf(opts.Driver),
		log:    opts.Logger.With(zap.String("store", opts.Name)),
		ident:  identSuffix(opts.Application),
		queues: map[string]*queue{},
		held:   map[string]*Lock{},
		timer:  time.NewTimer(time.Hour),
		stop:   make(chan struct{}),
	}
	m.tel = newTelemetry(opts, m.counts)
	m.renewer, _ = opts.Driver.(drivers.Renewer)
	if _, ok := opts.Driver.(drivers.Subscriber); ok && !m.feat.InProcess {
		m.tracking, m.attempts = true, map[string]bool{}
	}
	m.handoff, _ = opts.Driver.(drivers.Handoverer)
	m.bg, m.bgCancel = context.WithCancel(context.Background())
	m.closing, m.closingCancel = context.WithCancel(context.Background())
	m.cleanups, m.cleanupsCancel = context.WithCancel(context.Background())
	return m, nil
}

// Name returns the store's name.
func (m *Mutex) Name() string { m.mustBuilt(); return m.opts.Name }

// Prefix returns the prefix of the lock names in the store.
func (m *Mutex) Prefix() string { m.mustBuilt(); return m.opts.Prefix }

// Driver returns the store's driver.
func (m *Mutex) Driver() drivers.Driver { m.mustBuilt(); return m.drv }

// Features returns the store's features.
func (m *Mutex) Features() drivers.Features { m.mustBuilt(); return m.feat }

// TryAcquire makes one attempt to acquire the lock name. When another
// holder has it — this Mutex included, or waiters queued in this Mutex for
// it (TryAcquire does not jump the queue) — it returns an error wrapping
// ErrLocked, never a nil Lock with a nil error. Only WithTTL is read from
// opts.
func (m *Mutex) TryAcquire(ctx context.Context, name string, opts ...AcquireOption) (*Lock, error) {
	m.mustBuilt()
	mustCtx(ctx)
	o, err := m.acquireOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := m.checkName(name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	if q := m.queues[name]; (q != nil && len(q.waiters) > 0) || m.held[name] != nil {
		m.mu.Unlock()
		return nil, lockedError(name)
	}
	w := m.enqueue(name, o.ttl)
	m.startLocked()
	m.subscribeLocked()
	m.countInProcess() // ended by attempt, below
	m.mu.Unlock()
	var l *Lock // with it, w was dequeued by attempt
	defer func() {
		if l == nil {
			m.dequeue(name, w)
		}
	}()

	now := time.Now()
	l, _, err = m.attempt(ctx, name, o.ttl, now, now, w)
	if l == nil && err == nil {
		err = lockedError(name)
	}
	return l, err
}

// Acquire acquires the lock name, waiting for it up to the Mutex's Timeout
// (or WithTimeout). It returns an error wrapping ErrTimeout when the time is
// up, ctx's cause when ctx ends first, ErrClosed when the Mutex closes.
//
// A store failure does not end the wait: Acquire retries with the same
// backoff as when the lock is held, until the timeout or ctx, so that a
// fail-over or a restart of the store is ridden out. When the time runs
// out after a failed attempt, the error wraps both ErrTimeout and the
// store's last *DriverError (ErrDriver); with NoWait it is that
// *DriverError. Only an error the driver marks permanent
// (drivers.ErrPermanent: bad credentials, missing permission) ends the
// wait at once, as a *DriverError. A store that grants the lock too late
// to keep (after its ttl) is ridden out too: the lock is released and the
// wait goes on.
//
// Waiting polls the store — first after RetryDelay, the delay doubling up to
// one second, bounded by the holder's remaining ttl when the store tells it —
// and is cut short by the store's wake-ups when it pushes them. One attempt
// is always given at least a second to answer, even past the deadline; a
// lock acquired too late is released.
func (m *Mutex) Acquire(ctx context.Context, name string, opts ...AcquireOption) (*Lock, error) {
	m.mustBuilt()
	mustCtx(ctx)
	o, err := m.acquireOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := m.checkName(name); err != nil {
		return nil, err
	}
	start := time.Now()
	ctx, span := m.tel.start(ctx, spanAcquire)
	attempts := 0
	l, err := m.acquire(ctx, name, o, start, &attempts)
	m.tel.acquired(ctx, span, name, start, attempts, l, err)
	return l, err
}

// acquire is Acquire's wait, started at start; it counts its store
// attempts in attempts.
func (m *Mutex) acquire(ctx context.Context, name string, o acquireOptions, start time.Time, attempts *int) (*Lock, error) {
	var deadline time.Time
	if o.timeout > 0 {
		deadline = start.Add(o.timeout)
	}
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	w := m.enqueue(name, o.ttl)
	m.startLocked()
	m.subscribeLocked()
	head, busy := m.queues[name].waiters[0] == w, m.held[name] != nil
	w.parked = !head || busy
	if !w.parked {
		m.countInProcess() // ended by the first attempt, below
	}
	m.mu.Unlock()

	var lastErr error // the store's error at the last attempt, if it failed
	var timer *time.Timer
	// One defer, not two: with this many returns, two would be run by
	// the runtime's defer chain instead of inline (open-coded) at each
	// return, which costs an uncontended acquisition ~3% of its CPU.
	taken := false // w dequeued by attempt, with the lock
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if !taken {
			m.dequeue(name, w)
		}
	}()
	// sleep waits for a wake-up, the delay (0: none), the deadline or ctx.
	sleep := func(delay time.Duration) error {
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return m.timeout(name, o.timeout, lastErr)
			}
			if delay <= 0 || left < delay {
				delay = left
			}
		}
		var tc <-chan time.Time
		if delay > 0 {
			if timer == nil {
				timer = time.NewTimer(delay)
			} else {
				timer.Reset(delay)
			}
			tc = timer.C
		}
		select {
		case <-w.wake:
		case <-tc:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if timer != nil {
			timer.Stop()
		}
		return nil
	}

	retry := backoff.Policy{Start: m.opts.RetryDelay, Cap: maxRetryDelay}.New()
	slept := false
	for first := true; ; first = false {
		if !first {
			if testHookWoken != nil {
				testHookWoken()
			}
			m.mu.Lock()
			if l := w.handed; l != nil {
				// our holder released it to us (handover.go). Had it
				// ended before we woke, end would have put us back first
				// in line already; one Close is releasing (not ended
				// yet) is not ours: back in line, we find it closed
				w.handed, l.handedTo = nil, nil
				if l.state == stateHeld {
					m.mu.Unlock()
					return l, nil
				}
				m.requeue(name, w)
			}
			closed := m.closed
			head, busy = m.queues[name].waiters[0] == w, m.held[name] != nil
			w.parked = !head || busy
			if !closed && !w.parked {
				m.countInProcess() // ended by the attempt, below
			}
			m.mu.Unlock()
			if closed {
				return nil, ErrClosed
			}
		}
		if !head || busy {
			// Our turn comes with a wake-up: the waiter before us left, or
			// our own holder released or lost the lock.
			slept = true
			if err := sleep(0); err != nil {
				return nil, err
			}
			continue
		}
		now := start // the first attempt, made at once, reuses the start time
		if slept {
			now = time.Now()
		}
		*attempts++
		l, res, err := m.attempt(ctx, name, o.ttl, now, deadline, w)
		switch {
		case l != nil:
			taken = true
			return l, nil
		case err != nil && !retriable(err):
			return nil, err
		case err != nil:
			// The store failed (a fail-over, a restart, a broken link):
			// ride it out within the wait's deadline and ctx.
			lastErr = err
		default:
			lastErr = nil
		}
		delay := retry.Next()
		if res.HolderTTL > 0 && res.HolderTTL < delay {
			delay = res.HolderTTL + time.Millisecond
		}
		if wait := m.blockingWait(now, deadline, o.ttl); err == nil && wait > 0 && time.Since(now) >= wait/2 {
			// The store waited for us: ask again at once. (A store that
			// could not block this time answered at once: back off.)
			delay = time.Microsecond
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return nil, m.timeout(name, o.timeout, lastErr)
		}
		slept = true
		if err := sleep(delay); err != nil {
			return nil, err
		}
	}
}

// timeout is the error of a wait for name whose timeout passed; lastErr is
// the store's error at its last attempt (nil: the store answered).
func (m *Mutex) timeout(name string, timeout time.Duration, lastErr error) error {
	switch {
	case lastErr != nil && timeout == NoWait:
		return lastErr
	case lastErr != nil:
		return fmt.Errorf("%w: %q not acquired within %v; the store failed at the last attempt: %w", ErrTimeout, name, timeout, lastErr)
	case timeout == NoWait:
		return fmt.Errorf("%w: %q is held", ErrTimeout, name)
	}
	return fmt.Errorf("%w: %q not acquired within %v", ErrTimeout, name, timeout)
}

// retriable reports whether Acquire retries after err: a store failure
// (*DriverError, including a store that did not answer in time) that the
// driver did not mark permanent (drivers.ErrPermanent: bad credentials,
// missing permission, bad configuration), or a lock the store granted too
// late to keep (lateError).
func retriable(err error) bool {
	if _, ok := err.(lateError); ok {
		return true
	}
	return errors.Is(err, ErrDriver) && !errors.Is(err, drivers.ErrPermanent)
}

// Held returns the locks this Mutex holds now (not released, not lost, not
// past their tracked expiry: see Lock.Held), in acquisition order; a new
// slice on each call.
func (m *Mutex) Held() []*Lock {
	m.mustBuilt()
	m.mu.Lock()
	now := time.Now()
	out := make([]*Lock, 0, len(m.held))
	for _, l := range m.held {
		if l.state == stateHeld && !pastExpiry(now, l.expiry) {
			out = append(out, l)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b *Lock) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// end finishes a lock (released, lost, closed) and hands the name to the
// next waiter; m.mu held.
func (m *Mutex) end(l *Lock, state lockState, cause error) {
	if !l.finish(state, cause) {
		return
	}
	name := l.name()
	if m.held[name] == l {
		delete(m.held, name)
	}
	if w := l.handedTo; w != nil {
		l.handedTo = nil
		if w.handed == l {
			// Handed to a waiter that has not woken to take it: it is
			// first in line again (and woken below), not the waiter
			// after it, which would talk to the store at the same time.
			w.handed = nil
			m.requeue(name, w)
		}
	}
	m.wakeHead(name)
}

// renewed records a successful acquire/extend/renew call started at start;
// m.mu held. A call started before the store's events were subscribed to
// is followed by a renewal at once: a loss the store reported in between
// went unseen (subscribe.go).
func (m *Mutex) renewed(l *Lock, start time.Time) {
	l.failures = 0
	l.renewedAt = start
	ttl := m.paceTTL(l, start)
	l.expiry = start.Add(ttl - drift(ttl))
	l.due = start.Add(ttl / 3)
	if start.Before(m.subSince) {
		l.due = start
	}
	m.wakeFor(l)
}

// wakeFor makes sure the scheduler looks at l by its renewal time (or its
// expiry, when that comes first: after a failed Extend); m.mu held. When it sleeps past it, its timer is brought forward. Only the
// timer: waking the goroutine at every acquisition would cost a thread
// wake-up each time while no other lock is held.
func (m *Mutex) wakeFor(l *Lock) {
	if at := minTime(l.due, l.expiry); at.Before(m.nextWake) {
		m.nextWake = at
		m.timer.Reset(time.Until(at))
	}
}

func (m *Mutex) driverError(op, name string, err error) error {
	m.tel.storeError(op, name)
	m.log.Warn("mutex store failed", zap.String("op", op), zap.String("lock", name), zap.Error(err))
	return &DriverError{Store: m.opts.Name, Op: op, Lock: name, Err: err}
}

// nameOf returns the lock name of a store key, or false when the key is
// not this Mutex's.
func (m *Mutex) nameOf(key string) (string, bool) {
	return strings.CutPrefix(key, m.opts.Prefix)
}

// testHookWoken, when set by a test, runs each time a waiting Acquire wakes,
// before it looks at what woke it.
var testHookWoken func()

// checkName refuses an empty name and one longer than MaxNameLength.
func (m *Mutex) checkName(name string) error {
	switch {
	case name == "":
		return ErrEmptyName
	case len(name) > m.opts.MaxNameLength:
		return fmt.Errorf("%w: %d bytes, store %q takes at most %d (maxNameLength)", ErrNameTooLong, len(name), m.opts.Name, m.opts.MaxNameLength)
	}
	return nil
}
