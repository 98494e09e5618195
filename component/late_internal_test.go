package component

import (
	"testing"
	"time"
)

// TestManyFailedRenewalsLinear: a store outage fails the renewals of every
// held lock at once, and renew records each failure (mayLand) with m.mu
// held. Recording n failures must cost about n map writes, not n² (a sweep
// of every recorded window at each failure held m.mu 1.5 s for 10,000
// locks, at every failed round: the scheduler could lose no lock at its
// expiry meanwhile, and no call of the Mutex went through).
func TestManyFailedRenewalsLinear(t *testing.T) {
	const n = 10000
	m := &Mutex{}
	locks := make([]*Lock, n)
	for i := range locks {
		locks[i] = &Lock{m: m, ttl: time.Second}
	}
	until := time.Now().Add(time.Hour)
	start := time.Now()
	m.mu.Lock()
	for _, l := range locks {
		m.mayLand(l, time.Second, until)
	}
	m.mu.Unlock()
	took := time.Since(start)

	// the same number of writes to a map of the same kind, as the yardstick
	ref := make(map[*Lock]lateWindow)
	start = time.Now()
	for _, l := range locks {
		ref[l] = lateWindow{ttl: time.Second, until: time.Now()}
	}
	base := time.Since(start)
	if len(m.late) != n || took > 100*base+20*time.Millisecond {
		t.Fatalf("%d failures recorded (%d windows) in %v, %d map writes in %v; want about the same", n, len(m.late), took, n, base)
	}
}
