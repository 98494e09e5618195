package component

import "time"

// A request to the store that failed — an Extend or a renewal whose call
// ended in an error, a timeout above all — may still reach the store
// later, after requests sent after it (on another connection) were
// applied: the store then keeps the lock for that request's ttl from when
// it lands. When a later Extend asked for a longer ttl, renewing every
// third of that ttl would leave the store free to give the lock to
// another while its holder believes it holds it. So until such a request
// can no longer land, the lock is renewed every third of the shortest ttl
// of those requests, and its tracked expiry counts with that ttl; the
// renewals still carry the lock's own ttl (the last Extend's).
//
// What bounds when such a request can land: the component gives every
// call a deadline (renewContext, Extend's), at which the driver gives the
// call up — go-redis and the MySQL driver close its connection, pgx closes
// it or cancels the statement — and a local store (file) applies it
// within the call. A networked store can still apply a request it took in
// before then, in the time it takes to get to it (a statement waiting for
// a row lock, a busy Redis): that is covered for up to attemptGrace past
// the call's end, the time the component gives any store call to answer.
// Nothing in the request itself bounds it: a store that takes longer than
// that to apply a request it took in is not covered.

// lateWindow is a lock's failed requests that may still land: the
// shortest of their ttls, until the latest of their bounds.
type lateWindow struct {
	ttl   time.Duration
	until time.Time
}

// mayLand records that a request of l setting ttl failed and may reach
// the store until until; m.mu held. It looks at l's window alone: a
// store outage fails the renewals of every held lock at once.
func (m *Mutex) mayLand(l *Lock, ttl time.Duration, until time.Time) {
	if m.late == nil {
		m.late = make(map[*Lock]lateWindow)
	}
	if w, ok := m.late[l]; ok && time.Now().Before(w.until) {
		ttl = min(ttl, w.ttl)
		until = maxTime(until, w.until)
	}
	m.late[l] = lateWindow{ttl: ttl, until: until}
}

// paceTTL is the ttl that paces l's renewals and bounds its tracked
// expiry for a call sent at at: l.ttl, or the shorter ttl of a failed
// request that may land after at; m.mu held. A window it finds over (at,
// never after now, is past it) it deletes; finish deletes the others.
func (m *Mutex) paceTTL(l *Lock, at time.Time) time.Duration {
	if len(m.late) == 0 {
		return l.ttl
	}
	w, ok := m.late[l]
	if !ok || !at.Before(w.until) {
		if ok {
			delete(m.late, l)
		}
		return l.ttl
	}
	return min(l.ttl, w.ttl)
}

// callEnd is until when a request of a call that ended now, bounded by
// deadline, may still land in the store.
func callEnd(deadline time.Time) time.Time {
	return maxTime(deadline, time.Now()).Add(attemptGrace)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
