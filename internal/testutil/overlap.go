package testutil

import (
	"context"
	"slices"
	"testing"
	"time"
)

// Overlap waits for both a holder's lock context to end (lost) and another
// client to be granted the same lock (granted: when it got it), and returns
// how long after the grant the holder was told: negative when it was told
// first. It fails the test when ctx ends first.
func Overlap(ctx context.Context, t testing.TB, lost <-chan struct{}, granted <-chan time.Time) time.Duration {
	t.Helper()
	var told, free time.Time
	for told.IsZero() || free.IsZero() {
		select {
		case <-lost:
			told = time.Now()
			lost = nil
		case free = <-granted:
			granted = nil
		case <-ctx.Done():
			t.Fatalf("holder told: %v, lock granted to another: %v: %v", !told.IsZero(), !free.IsZero(), ctx.Err())
		}
	}
	return told.Sub(free)
}

// ReportOverlaps reports, for gaps measured by Overlap, the share of
// holders told before the grant (told-first-%) and the 50th and 99th
// percentiles and the maximum of the overlaps, in milliseconds (a holder
// told first overlaps 0).
func ReportOverlaps(b *testing.B, gaps []time.Duration) {
	if len(gaps) == 0 {
		return
	}
	gaps = slices.Clone(gaps)
	first := 0
	for i, g := range gaps {
		if g < 0 {
			first++
			gaps[i] = 0
		}
	}
	slices.Sort(gaps)
	at := func(q float64) float64 {
		return float64(gaps[int(q*float64(len(gaps)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(100*float64(first)/float64(len(gaps)), "told-first-%")
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(at(1), "max-ms")
	b.ReportMetric(0, "ns/op")
}
