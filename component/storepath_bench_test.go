package component_test

import (
	"context"
	"testing"

	"github.com/mutexfx/mutexfx/component"
)

// BenchmarkStorePath measures the component's own cost on the path of a
// store that is not in process (attempt context, in-flight tracking,
// bookkeeping), with a store that answers at once: an uncontended Acquire
// and Release. The memory store's own share is BenchmarkAcquireRelease's
// floor; what a network store adds on top of its driver is this.
func BenchmarkStorePath(b *testing.B) {
	ctx := context.Background()
	m := newMutex(b, component.Options{Driver: newFaulty(), Timeout: component.Forever})
	b.ReportAllocs()
	for b.Loop() {
		l, err := m.Acquire(ctx, "n")
		if err != nil {
			b.Fatal(err)
		}
		if ok, err := l.Release(ctx); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
