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
		wait      time.Duration
		wantRuns  int
		wantEvery time.Duration
	}{
		{"half the ttl", []time.Duration{2 * time.Second}, 3500 * time.Millisecond, 3, time.Second},
		{"shorter ttl wins", []time.Duration{2 * time.Second, 400 * time.Millisecond}, 1100 * time.Millisecond, 5, 200 * time.Millisecond},
		{"longer ttl ignored", []time.Duration{400 * time.Millisecond, 2 * time.Second}, 1100 * time.Millisecond, 5, 200 * time.Millisecond},
		{"floor", []time.Duration{time.Millisecond}, 350 * time.Millisecond, 3, MinEvery},
		{"ceiling", []time.Duration{time.Hour}, 130 * time.Second, 2, MaxEvery},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var l Loop
				runs := 0
				var budget time.Duration
				run := func(ctx context.Context) {
					runs++
					dl, _ := ctx.Deadline()
					budget = time.Until(dl)
				}
				for _, ttl := range tc.ttls {
					l.Note(ttl, run)
				}
				time.Sleep(tc.wait)
				synctest.Wait()
				l.Stop()
				if runs != tc.wantRuns || budget != tc.wantEvery {
					t.Fatalf("%d runs, each given %v; want %d, %v", runs, budget, tc.wantRuns, tc.wantEvery)
				}
			})
		})
	}
}

// TestStopCutsRun: Stop ends a run in progress and waits for it; Note
// after Stop starts nothing.
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
		l.Note(time.Second, func(context.Context) { t.Error("ran after Stop") })
		time.Sleep(2 * time.Second)
		l.Stop()
	})
}
