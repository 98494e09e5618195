package component

import (
	"testing"

	"github.com/mutexfx/mutexfx/internal/bubble"
)

// Unpooled makes waiters unpooled for the rest of t (see bubble.Unpool):
// for tests in a testing/synctest bubble. Call it outside the bubble.
func Unpooled(t testing.TB) { bubble.Unpool(t) }

// NoTelemetry makes m record no metrics and no spans: the baseline of
// BenchmarkAcquireRelease. Call it before m's first use.
func NoTelemetry(m *Mutex) {
	m.tel.close()
	m.tel = nil
}
