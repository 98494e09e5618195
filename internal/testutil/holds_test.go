package testutil

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHolds: a holder goes on only once ready held for it, ready is asked
// about the worker holding, and Serve returns when every worker is done.
func TestHolds(t *testing.T) {
	const workers, turns = 3, 5
	h := NewHolds(t, workers)
	var lock sync.Mutex      // the lock the workers take turns on
	var holding atomic.Int32 // the worker holding lock, plus one
	var readied [workers]atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			defer h.Done(w)
			for turn := range int32(turns) {
				lock.Lock()
				holding.Store(int32(w) + 1)
				h.Hold(w)
				if got := readied[w].Load(); got != turn+1 {
					t.Errorf("worker %d went on after ready held %d times in %d turns", w, got, turn+1)
				}
				holding.Store(0)
				lock.Unlock()
			}
		})
	}
	h.Serve(t, 5*time.Second, "the holder's turn", func(holder int) bool {
		if got := holding.Load(); got != int32(holder)+1 {
			t.Errorf("ready asked about worker %d while %d holds", holder, got-1)
		}
		readied[holder].Add(1)
		return true
	})
	wg.Wait()
	for w := range workers {
		if !h.IsDone(w) || readied[w].Load() != turns {
			t.Errorf("worker %d: done %v, ready held %d times; want done after %d", w, h.IsDone(w), readied[w].Load(), turns)
		}
	}
}
