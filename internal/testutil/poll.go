package testutil

import (
	"testing"
	"time"
)

// PollEvery is the pause between two checks of Poll.
const PollEvery = 5 * time.Millisecond

// Poll checks cond every PollEvery until it holds, and fails the test
// naming what after limit: the one way tests wait for a state that sends
// no signal — a real store's expiry, another process's lock, log entries.
// In-process timing uses signals or testing/synctest instead.
func Poll(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	if cond() {
		return
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(PollEvery)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			if cond() {
				return
			}
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		case <-tick.C:
			if cond() {
				return
			}
		}
	}
}
