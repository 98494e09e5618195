//go:build linux || darwin || dragonfly || freebsd || openbsd || windows

package file

import "testing"

// TestMonoNowFollowsHostClock: the computed clock is never ahead of the
// host's and behind it by at most syncGap, whatever delayed the process
// while it first read the host's clock.
func TestMonoNowFollowsHostClock(t *testing.T) {
	for range 1000 {
		before, err := hostClock()
		if err != nil {
			t.Fatal(err)
		}
		now, err := monoNow()
		if err != nil {
			t.Fatal(err)
		}
		after, err := hostClock()
		if err != nil {
			t.Fatal(err)
		}
		if now > after || now < before-int64(syncGap) {
			t.Fatalf("monoNow %d outside [%d - %v, %d]", now, before, syncGap, after)
		}
	}
}
