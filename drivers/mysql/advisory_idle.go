package mysql

import (
	"context"
	"time"
)

// A held lock's connection runs no statement of its own while the lock is
// held: probes and renewals ask on a pooled connection (advisory_monitor.go). The
// server closes a connection idle for its session's wait_timeout, and the
// lock goes with it — to a waiter blocked in GET_LOCK at once, before the
// holder could be told. So each lock's session's wait_timeout is read with
// its session (advisory_session.go), and the monitor checks the lock on its own
// connection (heldLock.check, which also finds a lock lost) once the
// connection has been idle for half of it: a live holder's connection never
// idles out, while one cut from the server (a partition) still loses its
// locks there within wait_timeout of the last statement the server got.
// With the driver's own pool, wait_timeout is a year unless the DSN sets
// it; with NewWithDB it is the pool's (the server's default is 8 hours).
//
// The monitor also gives up, by itself, a lock whose renewal failed and
// that no renewal confirmed by its expiry (renewFailed): its holder (the
// component) counts it lost by then and never releases it, and an advisory
// lock does not expire.

// upkeep touches the connections of hs due for it (checkOwn: a goroutine
// each, so that a stalled one delays nothing else) and drops the locks
// past the time a failed renewal set for them. It returns when it has
// more to do.
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
			// A statement runs, or is about to, on its connection: that
			// one counts. Look again soon in case it is a long one.
			soon(now.Add(min(a.s.probe, h.idle/4)))
			continue
		}
		soon(now.Add(h.idle / 2))
	}
	return next
}

// wakeFor wakes the monitor for h, just acquired, when h's connection may
// have to be touched before the monitor's next look (otherwise, up to a
// probe interval away): a session wait_timeout under four probe intervals.
func (a *advisoryDriver) wakeFor(h *heldLock) {
	if h.idle > 0 && h.idle/2 < 2*a.s.probe {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// confirm records that a call started at start found h held: its holder
// counts it held until start + ttl at least.
func (h *heldLock) confirm(start time.Time) {
	h.confirmed.Store(start.UnixNano())
	h.dropAt.Store(0)
}

// renewFailed records that a renewal of h with ttl got no answer. The
// holder (the component) retries until the lock's expiry, ttl after the
// start of the last call that confirmed it (or a little before), and
// counts it lost then: unless a call confirms h first, the monitor drops h
// at that time, after telling the subscribers — never earlier, since one
// failed call must not give up a lock its holder still counts as held.
// Without a ttl, a renewal whose ctx ended drops h at once.
func (a *advisoryDriver) renewFailed(ctx context.Context, h *heldLock, ttl time.Duration) {
	if ttl > 0 {
		h.dropAt.CompareAndSwap(0, h.confirmed.Load()+int64(ttl))
	} else if ctx.Err() != nil {
		a.lose(h)
	}
}
