package reclaim

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLoop(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ttls      []time.Duration
		wantRuns  int
		wantEvery time.Duration
	}{
		{"half the ttl", []time.Duration{2 * time.Second}, 3, time.Second},
		{"shorter ttl wins", []time.Duration{2 * time.Second, 400 * time.Millisecond}, 5, 200 * time.Millisecond},
		{"longer ttl ignored", []time.Duration{400 * time.Millisecond, 2 * time.Second}, 5, 200 * time.Millisecond},
		{"floor", []time.Duration{time.Millisecond}, 3, MinEvery},
		{"ceiling", []time.Duration{time.Hour}, 2, MaxEvery},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var l Loop
				start := time.Now()
				// each run: when it started and the time it was given, in
				// the bubble's exact clock
				type run struct{ at, budget time.Duration }
				runs := make(chan run, tc.wantRuns+1)
				fn := func(ctx context.Context) {
					dl, _ := ctx.Deadline()
					select {
					case runs <- run{time.Since(start), time.Until(dl)}:
					default:
						t.Error("more runs than the test takes")
					}
				}
				for _, ttl := range tc.ttls {
					l.Note(ttl, fn)
				}
				// The runs come one period apart from the last Note (the
				// bubble's clock advances to each): the kth at k periods.
				for k := 1; k <= tc.wantRuns; k++ {
					r := <-runs
					if r.at != time.Duration(k)*tc.wantEvery || r.budget != tc.wantEvery {
						t.Errorf("run %d at %v, given %v; want at %v, given %v", k, r.at, r.budget, time.Duration(k)*tc.wantEvery, tc.wantEvery)
					}
				}
				// and no other run by then, one due at the same instant
				// included
				synctest.Wait()
				if n := len(runs); n > 0 {
					t.Errorf("%d more runs by %v", n, time.Duration(tc.wantRuns)*tc.wantEvery)
				}
				l.Stop()
			})
		})
	}
}

// TestStopCutsRun: Stop ends a run in progress and waits for it; Note
// after Stop starts nothing, on a Loop stopped before any Note too (the
// one where a Note could start a loop).
func TestStopCutsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l Loop
		started := make(chan struct{})
		cut := false
		l.Note(time.Second, func(ctx context.Context) {
			close(started)
			<-ctx.Done()
			cut = ctx.Err() == context.Canceled
		})
		<-started
		l.Stop()
		if !cut {
			t.Fatal("run not cut by Stop")
		}
		var fresh Loop
		fresh.Stop()
		for _, stopped := range []*Loop{&l, &fresh} {
			stopped.Note(time.Second, func(context.Context) { t.Error("ran after Stop") })
		}
		// No signal tells of a run that never comes: four periods of the
		// bubble's clock, in which a loop started by Note would run.
		time.Sleep(2 * time.Second)
		l.Stop()
		fresh.Stop()
	})
}
