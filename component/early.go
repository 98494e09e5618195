package component

// A driver may report a lock lost (drivers.Lost) before the call that took
// it has returned: a hang-up watch sees its connection end right after the
// grant, while the Mutex has not yet recorded the lock as held. Such an
// event would find no held lock of its token and be dropped, and the loss
// be noticed only at the next renewal. So while an acquisition or a
// handover is in flight on a store that pushes events, its token is
// tracked, a Lost event for it is remembered, and the lock is lost the
// moment it is recorded.

// trackAttempt starts tracking token, for a handover about to be sent to
// the store; it returns the function that stops tracking it (a no-op for
// stores that push no events or run in process). An acquisition's token is
// tracked by its attempt's context (beginAttempt).
func (m *Mutex) trackAttempt(token string) (untrack func()) {
	if !m.tracking {
		return func() {}
	}
	m.mu.Lock()
	m.attempts[token] = false
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(m.attempts, token)
		m.mu.Unlock()
	}
}

// lostEarly records a Lost event for a token whose acquisition or
// handover is in flight, and reports whether there was one; m.mu held.
func (m *Mutex) lostEarly(token string) bool {
	for a := m.inflight; a != nil; a = a.next {
		if a.token == token {
			a.lost = true
			return true
		}
	}
	if _, ok := m.attempts[token]; !ok {
		return false
	}
	m.attempts[token] = true
	return true
}

// loseIfLostEarly loses l, just recorded as held, when the store reported
// its token lost while the call that took it was in flight (a, its
// attempt; nil for a handover); m.mu held.
func (m *Mutex) loseIfLostEarly(l *Lock, a *attemptCtx) {
	if (a != nil && a.lost) || m.attempts[l.token] {
		m.lose(l, CauseStoreReported, "the store reported it lost as it was acquired")
	}
}
