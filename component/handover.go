package component

import (
	"context"
	"slices"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// Handover: when the driver can pass a held lock to a new token in one
// operation (drivers.Handoverer) and a waiter of this Mutex is first in
// line for the name being released, Release hands the lock straight to
// that waiter: one round trip and one write instead of the release, the
// waiter's wake-up and its acquisition. The store declines (it releases
// instead) when waiters of other processes queue for the lock there, so
// a busy process cannot keep a lock from the others.

// handoverTarget returns the waiter the lock l, being released, may be
// handed to, marked handing, or nil; m.mu held.
func (m *Mutex) handoverTarget(l *Lock) *waiter {
	if m.handoff == nil || m.closed {
		return nil
	}
	q := m.queues[l.name()]
	if q == nil || len(q.waiters) == 0 {
		return nil
	}
	w := q.waiters[0]
	if !w.parked {
		// it is talking to the store (it found the name free before l
		// was taken, by a TryAcquire): it gets the lock from there
		return nil
	}
	w.handing = true
	return w
}

// handover releases l by handing it to w (see above). It reports what
// Release does: whether l was still held.
func (m *Mutex) handover(ctx context.Context, l *Lock, w *waiter) (bool, error) {
	start := time.Now()
	token := m.newToken(start)
	defer m.trackAttempt(token)()
	released, res, err := m.handoff.Handover(ctx, l.key, l.token, drivers.AcquireRequest{Key: l.key, Token: token, TTL: w.ttl})

	// answered after the waiter's ttl: the lock may have expired there
	overdue := time.Since(start) >= w.ttl-drift(w.ttl)

	m.mu.Lock()
	w.handing = false
	q := m.queues[l.name()]
	waiting := q != nil && len(q.waiters) > 0 && q.waiters[0] == w
	if err != nil || !res.Acquired || !waiting || m.closed || overdue {
		// Not handed, or handed to a waiter that gave up meanwhile, or
		// after Close, or too late: the old lock ends as a release does
		// (waking the first waiter, which acquires as usual), and a lock
		// taken for nobody is released.
		m.end(l, stateReleased, ErrReleased)
		// a failed call may have handed it over all the same
		orphan, closed := err != nil || res.Acquired, m.closed
		if orphan && !closed {
			m.cleanupLocked(l.key, token)
		}
		m.mu.Unlock()
		if orphan && closed {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptGrace)
			_, _ = m.drv.Release(rctx, l.key, token)
			cancel()
		}
		if err != nil {
			return false, m.driverError("release", l.name(), err)
		}
		return released, nil
	}

	// Handed: l ends without waking anyone, and w's lock takes its place.
	next := &Lock{m: m, key: l.key, token: token, fence: res.Fence, acquiredAt: start, ttl: w.ttl}
	l.finish(stateReleased, ErrReleased)
	m.seq++
	next.seq = m.seq
	m.held[l.name()] = next
	m.renewed(next, start)
	q.waiters = slices.Delete(q.waiters, 0, 1)
	if len(q.waiters) == 0 {
		m.forgetQueue(l.name(), q)
	}
	w.handed, next.handedTo = next, w
	m.loseIfLostEarly(next, nil) // w then goes back first in line
	w.signal()
	m.mu.Unlock()
	return true, nil
}
