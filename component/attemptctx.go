package component

import (
	"context"
	"fmt"
	"time"
)

// attemptCtx is the context of one store attempt (attempt): the caller's
// ctx, ended early by Close or when the attempt's limit passes. It costs
// one cancelable context and no timer: the Mutex registers it while it is
// in flight (beginAttempt), Close cancels it, and the renewal scheduler,
// whose timer it brings forward when needed, cancels it at its limit
// (limitAttempts). An attempt that finds the store at once thus arms no
// timer of its own and registers with no other context.
type attemptCtx struct {
	context.Context // context.WithCancelCause of the caller's ctx
	cancel          context.CancelCauseFunc
	limit           time.Time
	token           string

	// Guarded by Mutex.mu: lost is set when the store reported token
	// lost while the attempt was in flight (early.go); prev and next link
	// the attempts in flight (Mutex.inflight).
	lost       bool
	prev, next *attemptCtx
}

// Deadline is the earlier of the caller's deadline and the limit, so that a
// driver bounding its network calls by the deadline (go-redis with
// ContextTimeoutEnabled) stops at the limit on its own.
func (a *attemptCtx) Deadline() (time.Time, bool) {
	if d, ok := a.Context.Deadline(); ok && d.Before(a.limit) {
		return d, true
	}
	return a.limit, true
}

// errAttemptLimit is the cause with which the limit ends an attempt.
var errAttemptLimit = fmt.Errorf("mutexfx: the attempt's limit passed: %w", context.DeadlineExceeded)

// Err is context.DeadlineExceeded once the limit ended the attempt, as a
// context.WithDeadline's would be (a caller's ctx cancelled with a cause
// that wraps DeadlineExceeded still reads Canceled). Contexts derived from
// the attempt's see Canceled then, with errAttemptLimit as their cause.
func (a *attemptCtx) Err() error {
	err := a.Context.Err()
	if err != nil && context.Cause(a.Context) == errAttemptLimit {
		return context.DeadlineExceeded
	}
	return err
}

// beginAttempt counts a store attempt for token, bounded by limit, in
// flight (Close waits for it and cancels it) and tracks its token
// (early.go); nil after Close. endAttempt ends it.
func (m *Mutex) beginAttempt(ctx context.Context, token string, limit time.Time) *attemptCtx {
	inner, cancel := context.WithCancelCause(ctx)
	a := &attemptCtx{Context: inner, cancel: cancel, limit: limit, token: token}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		cancel(nil)
		return nil
	}
	m.calls++
	a.next = m.inflight
	if a.next != nil {
		a.next.prev = a
	}
	m.inflight = a
	if limit.Before(m.nextWake) {
		m.nextWake = limit
		m.timer.Reset(time.Until(limit))
	}
	return a
}

// endAttempt ends what beginAttempt began, once the attempt's lock (if
// any) is recorded or released: the token is no longer tracked.
func (m *Mutex) endAttempt(a *attemptCtx) {
	a.cancel(nil)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endAttemptLocked(a)
}

// endAttemptLocked is endAttempt with m.mu held, once a.cancel was
// called.
func (m *Mutex) endAttemptLocked(a *attemptCtx) {
	if a.prev != nil {
		a.prev.next = a.next
	} else {
		m.inflight = a.next
	}
	if a.next != nil {
		a.next.prev = a.prev
	}
	a.prev, a.next = nil, nil
	m.endCallLocked()
}

// limitAttempts cancels the attempts in flight whose limit has passed at
// now and returns the earlier of next and the next limit; m.mu held.
func (m *Mutex) limitAttempts(now, next time.Time) time.Time {
	for a := m.inflight; a != nil; a = a.next {
		if !now.Before(a.limit) {
			a.cancel(errAttemptLimit)
			continue
		}
		next = minTime(next, a.limit)
	}
	return next
}

// cancelAttempts cancels the attempts in flight, as Close starts; m.mu held.
func (m *Mutex) cancelAttempts() {
	for a := m.inflight; a != nil; a = a.next {
		a.cancel(nil)
	}
}
