package sqltest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TakeTurns is the run of a fair hand-off test: a worker for each of ms
// (components on drivers of their own, as in separate processes) takes
// name turns times, asking again right after each release. A holder keeps
// the lock until every other worker still taking turns is queued behind it
// in the store, as queued(holder, w) tells of worker w (polled, failing t
// after 10 s). It returns the workers in the order they took the lock;
// their failures are errors of t.
func TakeTurns(ctx context.Context, t testing.TB, ms []*component.Mutex, name string, turns int, queued func(holder, w int) bool) []int {
	t.Helper()
	holds := testutil.NewHolds(t, len(ms))
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for w, m := range ms {
		wg.Go(func() {
			defer holds.Done(w)
			for range turns {
				l, err := m.Acquire(ctx, name, component.WithTimeout(20*time.Second))
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				mu.Lock()
				order = append(order, w)
				mu.Unlock()
				holds.Hold(w)
				if ok, err := l.Release(ctx); !ok || err != nil {
					t.Errorf("worker %d: Release = %v, %v", w, ok, err)
					return
				}
			}
		})
	}
	holds.Serve(t, 10*time.Second, "the other workers queued behind the holder", func(holder int) bool {
		for w := range ms {
			if w != holder && !holds.IsDone(w) && !queued(holder, w) {
				return false
			}
		}
		return true
	})
	wg.Wait()
	return order
}
