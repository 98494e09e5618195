package component

import (
	"context"
	"time"
)

// A held lock ends at its tracked expiry (Lock.expiry) even when nobody is
// there to end it: the scheduler's timer ends it then, but a timer can
// fire late on a busy machine, after the store could have given the lock
// to another holder. So whoever asks — Lock.Err, Lock.Held, and Err of the
// lock's context and of Run's (Do's) fn context — also checks the expiry,
// and ends the lock itself when it has passed: a holder that checks before
// it writes is never told "held" past the expiry. (Done can still close
// late: it is the timer's; and context.Cause asks nothing of the context
// but its cause: it is nil until the lock ended, by the timer or by an Err.)

// expireLocked ends l as lost if it is held past its tracked expiry (at
// now), and asks the store to free it, best effort; m.mu held. It reports
// whether it did.
func (m *Mutex) expireLocked(l *Lock, now time.Time) bool {
	if l.state != stateHeld || !pastExpiry(now, l.expiry) {
		return false
	}
	m.lose(l, CauseExpired, "the store did not confirm it before its expiry")
	// The store may still hold it for us (a slow store, a session lock
	// whose connection looks alive): free it for the others.
	m.cleanupLocked(l.key, l.token)
	return true
}

// pastExpiry reports whether now is at or past exp, a tracked expiry, by
// the monotonic clock or by the wall clock. Go's monotonic clock (Linux's
// CLOCK_MONOTONIC) stands still while the host is suspended; the store's
// clock does not, and the wall clock is set forward on resume. So a lock
// the store let expire while the host slept reads as past its expiry at
// once on resume, not only when its timer fires, up to ttl/3 later. A
// wall clock stepped forward ends locks early (the safe side); one
// stepped back is covered by the monotonic clock.
func pastExpiry(now, exp time.Time) bool {
	if !now.Before(exp) {
		return true
	}
	wall := now.Round(0) // without its monotonic reading: compared by the wall clock
	if testHookWall != nil {
		wall = testHookWall(wall)
	}
	return !wall.Before(exp)
}

// testHookWall, when set by a test, maps the wall clock readings of
// pastExpiry: a wall clock ahead of the monotonic one is what a host
// suspended past a lock's expiry shows on resume.
var testHookWall func(time.Time) time.Time

// lockContext is a lock's context: Err also checks the lock's expiry.
type lockContext struct {
	context.Context // cancelled with the cause when the lock ends
	l               *Lock
	cancel          context.CancelCauseFunc // Context's
}

// Err returns nil while the lock is held and not past its expiry, then
// context.Canceled (context.Cause tells why the lock ended).
func (c *lockContext) Err() error { return expiringErr(c.Context, c.l) }

// expiringErr is the Err of ctx, a context that ends with lock l (its own,
// or Run's): before it answers nil, it ends l as lost if l is past its
// tracked expiry, which cancels ctx in the same call.
func expiringErr(ctx context.Context, l *Lock) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m := l.m
	m.mu.Lock()
	m.expireLocked(l, time.Now())
	m.mu.Unlock()
	return ctx.Err()
}
