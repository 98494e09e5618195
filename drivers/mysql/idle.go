package mysql

import (
	"context"
	"time"
)

// A held lock's connection runs no statement of its own while the lock is
// held: probes and renewals ask on a pooled connection (monitor.go). The
// server closes a connection idle for its session's wait_timeout, and the
// lock goes with it — to a waiter blocked in GET_LOCK at once, before the
// holder could be told. So each lock's session's wait_timeout is read with
// its session (identity.go), and the monitor checks the lock on its own
// connection (heldLock.check, which also finds a lock lost) once the
// connection has been idle for half of it: a live holder's connection never
// idles out, while one cut from the server (a partition) still loses its
// locks there within wait_timeout of the last statement the server got.
// With the driver's own pool, wait_timeout is a year unless the DSN sets
// it; with NewWithDB it is the pool's (the server's default is 8 hours).

// upkeep touches the connections of hs due for it (a goroutine each, so
// that a stalled one delays nothing else). It returns when it has more to
// do.
func (a *advisory) upkeep(ctx context.Context, hs []*heldLock) time.Time {
	now := time.Now()
	next := now.Add(time.Hour)
	soon := func(t time.Time) {
		if t.Before(next) {
			next = t
		}
	}
	for _, h := range hs {
		if h.idle <= 0 {
			continue
		}
		if due := time.Unix(0, h.used.Load()).Add(h.idle / 2); now.Before(due) {
			soon(due)
			continue
		}
		if !h.mu.TryLock() {
			// A statement runs, or is about to, on its connection: that
			// one counts. Look again soon in case it is a long one.
			soon(now.Add(min(a.d.s.probe, h.idle/4)))
			continue
		}
		if h.done {
			h.mu.Unlock()
			continue
		}
		soon(now.Add(h.idle / 2))
		a.monitorWG.Add(1) // the monitor's own count is in: Close waits for both
		go a.touch(ctx, h)
	}
	return next
}

// touch runs a statement on h's connection, h.mu held (it unlocks it),
// and reports h lost when that connection no longer holds it. ctx ends
// with Close, whose cut ends a stalled statement.
func (a *advisory) touch(ctx context.Context, h *heldLock) {
	defer a.monitorWG.Done()
	defer h.mu.Unlock()
	if ok, _ := h.check(ctx); !ok && ctx.Err() == nil {
		a.loseLocked(h)
	}
}

// wakeFor wakes the monitor for h, just acquired, when h's connection may
// have to be touched before the monitor's next look (otherwise, up to a
// probe interval away): a session wait_timeout under four probe intervals.
func (a *advisory) wakeFor(h *heldLock) {
	if h.idle > 0 && h.idle/2 < 2*a.d.s.probe {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}
