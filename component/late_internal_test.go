package component

import (
	"testing"
	"time"
)

// TestMayLandLooksAtItsLockOnly: a store outage fails the renewals of every
// held lock at once, and renew records each failure (mayLand) with m.mu
// held, so recording one must not visit the other locks' windows (a sweep
// of every window at each failure held m.mu 1.5 s for 10,000 locks). A
// window that is over is deleted when its own lock is paced (paceTTL).
func TestMayLandLooksAtItsLockOnly(t *testing.T) {
	m := &Mutex{}
	a, b := &Lock{m: m, ttl: time.Second}, &Lock{m: m, ttl: 10 * time.Second}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mayLand(a, 300*time.Millisecond, now.Add(-time.Millisecond)) // over already
	m.mayLand(b, 2*time.Second, now.Add(time.Hour))
	if _, ok := m.late[a]; !ok || len(m.late) != 2 {
		t.Fatalf("windows %v: recording b's failure touched a's window", m.late)
	}
	m.mayLand(b, 3*time.Second, now.Add(time.Minute)) // merged: shortest ttl, latest end
	if w := m.late[b]; w.ttl != 2*time.Second || !w.until.Equal(now.Add(time.Hour)) {
		t.Fatalf("b's window %+v, want 2s until +1h", w)
	}
	if got := m.paceTTL(a, now); got != a.ttl {
		t.Fatalf("paceTTL(a) = %v after its window ended, want its ttl %v", got, a.ttl)
	}
	if got := m.paceTTL(b, now); got != 2*time.Second {
		t.Fatalf("paceTTL(b) = %v while its window is open, want 2s", got)
	}
	if _, ok := m.late[a]; ok || len(m.late) != 1 {
		t.Fatalf("windows %v: a's ended window was not deleted by its pacing", m.late)
	}
}

// BenchmarkMayLandOutage: the cost of recording the failed renewals of
// 10,000 held locks, one store outage's worth, with m.mu held.
func BenchmarkMayLandOutage(b *testing.B) {
	const n = 10000
	m := &Mutex{}
	locks := make([]*Lock, n)
	for i := range locks {
		locks[i] = &Lock{m: m, ttl: time.Second}
	}
	until := time.Now().Add(time.Hour)
	for b.Loop() {
		m.mu.Lock()
		for _, l := range locks {
			m.mayLand(l, time.Second, until)
		}
		m.late = nil
		m.mu.Unlock()
	}
}
