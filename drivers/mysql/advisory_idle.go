package mysql

import (
	"context"
	"time"
)

// Probes and renewals ask on pooled connections, so a held lock's own
// connection may idle, and the server closes a connection idle for its
// wait_timeout, handing the lock to a waiter before the holder is told. So
// the monitor checks a lock on its own connection (checkOwn) once idle for
// half its wait_timeout: a live holder's connection never idles out, while
// a partitioned one still loses its locks within wait_timeout.

// upkeep touches the connections of hs due for it (checkOwn) and drops the
// locks past the time a failed renewal set (renewFailed). It returns when
// to run again.
func (a *advisoryDriver) upkeep(hs []*heldLock) time.Time {
	now := time.Now()
	next := now.Add(time.Hour)
	soon := func(t time.Time) {
		if t.Before(next) {
			next = t
		}
	}
	for _, h := range hs {
		if at := h.dropAt.Load(); at != 0 {
			if now.UnixNano() >= at {
				a.lose(h) // (never waits for a busy connection)
				continue
			}
			soon(time.Unix(0, at))
		}
		if h.idle <= 0 {
			continue
		}
		if due := time.Unix(0, h.used.Load()).Add(h.idle / 2); now.Before(due) {
			soon(due)
			continue
		}
		if a.checkOwn(h, nil) == nil {
			// A statement runs there: it counts; look again soon.
			soon(now.Add(min(a.s.probe, h.idle/4)))
			continue
		}
		soon(now.Add(h.idle / 2))
	}
	return next
}

// wakeFor wakes the monitor for h, just acquired, when h's wait_timeout is
// under four probe intervals (a touch may be due before the next look).
func (a *advisoryDriver) wakeFor(h *heldLock) {
	if h.idle > 0 && h.idle/2 < 2*a.s.probe {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// confirm records that a call started at start found h held.
func (h *heldLock) confirm(start time.Time) {
	h.confirmed.Store(start.UnixNano())
	h.dropAt.Store(0)
}

// renewFailed records that a renewal of h with ttl got no answer. Its
// holder counts h lost at its expiry (ttl after the last confirming call's
// start) and never releases it, and an advisory lock does not expire:
// unless confirmed first, the monitor drops h then, never earlier. Without
// a ttl, a renewal whose ctx ended drops h at once.
func (a *advisoryDriver) renewFailed(ctx context.Context, h *heldLock, ttl time.Duration) {
	if ttl > 0 {
		h.dropAt.CompareAndSwap(0, h.confirmed.Load()+int64(ttl))
	} else if ctx.Err() != nil {
		a.lose(h)
	}
}
