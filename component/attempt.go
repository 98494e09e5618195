package component

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"go.uber.org/zap"
)

// attempt makes one acquisition attempt, started at now, for the queue head
// w. It returns the lock, or the store's answer when the lock is taken, or
// an error. With the lock, w has been dequeued (its owner's last use of
// it), in the same hold of m.mu that records the lock; else the caller
// dequeues it. The store is given until the wait's deadline (zero: none) and at
// least attemptGrace to answer; a lock acquired after that, or after ctx
// ended, is released in the background.
func (m *Mutex) attempt(ctx context.Context, name string, ttl time.Duration, now time.Time, deadline time.Time, w *waiter) (*Lock, drivers.AcquireResult, error) {
	key, token := m.keyToken(m.opts.Prefix, name, now)

	wait := m.blockingWait(now, deadline, ttl)
	req := drivers.AcquireRequest{Key: key, Token: token, TTL: ttl, Wait: wait}
	var res drivers.AcquireResult
	var err error
	late, closing, overdue := false, false, false
	var actx *attemptCtx // nil in process
	ended := false       // the call's count (and actx) ended with the lock recorded
	if m.feat.InProcess {
		// Counted (by the caller, in the hold of m.mu in which it found
		// the Mutex open and w first in line), not cancelled: Close waits
		// for the short call, so the driver is not closed under it.
		defer func() {
			if !ended {
				m.endCall()
			}
		}()
		res, err = m.drv.Acquire(ctx, req)
	} else {
		limit := attemptLimit(now, deadline, ttl, wait)
		// ctx's end and Close cancel the attempt too; the wait's deadline
		// does not: the attempt has its grace.
		actx = m.beginAttempt(ctx, token, limit)
		if actx == nil {
			return nil, res, ErrClosed
		}
		// after a lock got after Close is released, and after the lock is
		// recorded (its token is tracked until then): the lock recorded,
		// it ends in the same hold of m.mu (ended)
		defer func() {
			if !ended {
				m.endAttempt(actx)
			}
		}()
		res, err = m.drv.Acquire(actx, req)
		answered := time.Now()
		closing = m.closing.Err() != nil
		late = (actx.Err() != nil || !answered.Before(limit)) && ctx.Err() == nil
		// The store's ttl started after now: answered this late, the lock
		// may have expired there already (and gone to another holder).
		overdue = answered.Sub(now) >= ttl-drift(ttl)
	}

	switch {
	case closing && (err != nil || res.Acquired):
		m.cleanup(key, token)
		return nil, res, ErrClosed
	case err != nil && ctx.Err() != nil:
		m.cleanup(key, token)
		return nil, res, context.Cause(ctx)
	case err != nil && (late || errors.Is(err, context.DeadlineExceeded)):
		m.cleanup(key, token)
		derr := m.driverError("acquire", name, err)
		return nil, res, fmt.Errorf("%w: %q: no answer from the store after %v: %w", ErrTimeout, name, time.Since(now).Round(time.Millisecond), derr)
	case err != nil:
		// Nothing is known: the store may have taken the lock for our
		// token before it failed. The release frees it only for us.
		m.cleanup(key, token)
		return nil, res, m.driverError("acquire", name, err)
	case !res.Acquired:
		return nil, res, nil
	case ctx.Err() != nil:
		m.cleanup(key, token)
		return nil, res, context.Cause(ctx)
	case late:
		m.cleanup(key, token)
		return nil, res, lateError{fmt.Errorf("%w: %q: acquired after the deadline, released", ErrTimeout, name)}
	case overdue:
		m.cleanup(key, token)
		return nil, res, lateError{fmt.Errorf("%w: %q: the store answered after the lock's ttl (%v), released", ErrTimeout, name, ttl)}
	}

	l := &Lock{m: m, key: key, token: token, fence: res.Fence, acquiredAt: now, ttl: ttl}
	if actx != nil {
		actx.cancel(nil) // done with; ended below unless Close came
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), attemptGrace)
		_, _ = m.drv.Release(rctx, key, token)
		rcancel()
		return nil, res, ErrClosed
	}
	m.seq++
	l.seq = m.seq
	// Keyed by the lock's own name (its key's tail), which end looks it
	// up and deletes it with: the same string, found without comparing
	// bytes.
	m.held[l.name()] = l
	m.renewed(l, now)
	if q := m.queues[name]; q != nil && len(q.waiters) > 0 && q.waiters[0] == w {
		// Leave the queue without waking the next waiter: it would only
		// find the name held by us.
		q.waiters = slices.Delete(q.waiters, 0, 1)
		if len(q.waiters) == 0 {
			m.forgetQueue(name, q)
		}
	}
	m.dequeueLocked(name, w)
	m.loseIfLostEarly(l, actx)
	if actx != nil {
		m.endAttemptLocked(actx)
	} else {
		m.endCallLocked()
	}
	ended = true
	m.mu.Unlock()
	return l, res, nil
}

// lateError is the error of an attempt whose lock the store granted too
// late to keep (it is released): the store was slow, which a wait rides
// out as it does a failed store (retriable) until its own deadline.
type lateError struct{ error }

func (e lateError) Unwrap() error { return e.error }

// attemptLimit is when an attempt started at now, waiting wait in the
// store, is given up: the wait's deadline (zero: none), but at least
// attemptGrace after the wait.
func attemptLimit(now, deadline time.Time, ttl, wait time.Duration) time.Time {
	limit := now.Add(attemptGrace + wait)
	switch {
	case deadline.IsZero():
		// No deadline: the attempt still ends if the store never answers.
		limit = now.Add(max(attemptGrace, ttl) + wait)
	case deadline.After(limit):
		limit = deadline
	}
	return limit
}

// blockingWait is how long a driver with Features.BlockingWait may block in
// the store for an attempt started at now: up to the deadline (zero: none),
// one second at most, so that wake-ups and ctx are looked at in between,
// and a third of the ttl at most: a lock granted at the end of the wait is
// tracked as acquired at its start (its store ttl may have started any time
// since): handed to its holder, it is then at most due for its first
// renewal, never already expired.
func (m *Mutex) blockingWait(now, deadline time.Time, ttl time.Duration) time.Duration {
	if !m.feat.BlockingWait {
		return 0
	}
	wait := min(maxRetryDelay, ttl/3)
	if !deadline.IsZero() {
		wait = max(min(wait, deadline.Sub(now)), 0)
	}
	return wait
}

// cleanup releases, in the background and best effort, a lock an attempt
// may have acquired when its caller no longer wants it.
func (m *Mutex) cleanup(key, token string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cleanupLocked(key, token)
}

// cleanupLocked is cleanup with m.mu held. The release runs in a goroutine
// owned by the Mutex (Close waits for it, up to attemptGrace); once Close
// has released the locks it does nothing.
func (m *Mutex) cleanupLocked(key, token string) {
	if m.draining {
		return
	}
	m.wg.Go(func() {
		ctx, cancel := m.cleanupContext()
		defer cancel()
		if _, err := m.drv.Release(ctx, key, token); err != nil {
			m.log.Debug("mutex cleanup release failed", zap.String("key", key), zap.Error(err))
		}
	})
}

// startLocked starts the renewal scheduler, once; m.mu held.
func (m *Mutex) startLocked() {
	if !m.started && !m.closed {
		m.started = true
		m.wg.Go(m.schedule)
	}
}
