// Package poll is the tests' one loop that waits for a state which sends
// no signal: a real store's expiry, a server process that starts to
// answer, another process's lock, a count of rows. In-process timing uses
// signals or testing/synctest instead.
package poll

import "time"

// Every is the usual pause between two checks: short against the waits
// it serves, long enough that a check's own cost stays small.
const Every = 5 * time.Millisecond

// Until checks cond at once, then every every (a check that costs more,
// such as one that starts connections, is spaced more), and a last time at
// limit; it reports whether cond held by then.
func Until(limit, every time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
			if cond() {
				return true
			}
		}
	}
}
