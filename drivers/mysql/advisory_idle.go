package mysql

import (
	"context"
	"time"
)

// Probes and renewals ask on pooled connections, so a held lock's own
// connection may idle. The server closes a connection idle for its
// wait_timeout, handing the lock to a waiter before the holder is told. So
// wait_timeout is read with the session (advisory_session.go), and the
// monitor checks the lock on its own connection (heldLock.check) once idle
// for half of it: a live holder's connection never idles out, while a
// partitioned one still loses its locks within wait_timeout. The own pool
// sets a year unless the DSN sets it; NewWithDB's pool keeps its own.
//
// The monitor also gives up a lock whose renewal failed and that no renewal
// confirmed by its expiry (renewFailed): its holder counts it lost by then
// and never releases it, and an advisory lock does not expire.

// upkeep touches the connections of hs due for it (checkOwn) and drops the
// locks past the time a failed renewal set. It returns when to run again.
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
// under four probe intervals: it may need a touch before the next look.
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

// renewFailed records that a renewal of h with ttl got no answer. The
// component counts h lost at its expiry (ttl after the last confirming
// call's start): unless confirmed first, the monitor drops h then, after
// telling the subscribers, and never earlier, while its holder counts it
// held. Without a ttl, a renewal whose ctx ended drops h at once.
func (a *advisoryDriver) renewFailed(ctx context.Context, h *heldLock, ttl time.Duration) {
	if ttl > 0 {
		h.dropAt.CompareAndSwap(0, h.confirmed.Load()+int64(ttl))
	} else if ctx.Err() != nil {
		a.lose(h)
	}
}
