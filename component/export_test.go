package component

import "testing"

// Unpooled makes waiters unpooled for the rest of t (see unpooled): for
// tests in a testing/synctest bubble. Call it outside the bubble.
func Unpooled(t testing.TB) {
	unpooled.Store(true)
	t.Cleanup(func() { unpooled.Store(false) })
}

// NoTelemetry makes m record no metrics and no spans: the baseline of
// BenchmarkAcquireRelease. Call it before m's first use.
func NoTelemetry(m *Mutex) {
	m.tel.close()
	m.tel = nil
}
