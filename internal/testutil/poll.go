package testutil

import (
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/internal/poll"
)

// PollEvery is the pause between two checks of Poll.
const PollEvery = poll.Every

// Poll checks cond every PollEvery until it holds (poll.Until), and fails
// the test naming what after limit.
func Poll(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll.Until(limit, PollEvery, cond) {
		t.Fatalf("timed out after %v waiting for %s", limit, what)
	}
}
