package mysql

import (
	"bytes"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestTableMixedLiveness: drivers with fair hand-off on (the default
// WaiterLiveness) and off (negative) share a lock table, as during a
// rolling change of the setting. Each gets a lock the other releases
// without waiting for its ttl, and under contention no two hold a lock at
// once (the row holds the holder's token throughout), its fences rise, and
// every worker gets its turns.
func TestTableMixedLiveness(t *testing.T) {
	ctx := ctxT(t)
	fair := openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: "mutexfx_test_locks"})
	unfair := openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: "mutexfx_test_locks", WaiterLiveness: -1})
	const ttl = 10 * time.Second
	mFair, mUnfair := mutexOn(t, fair, ttl), mutexOn(t, unfair, ttl)
	key := "mysqltest:" + runID + ":" + t.Name() + ":"

	// A waiter that relied on the holder's ttl would time out: the waits
	// are bounded well below it.
	for _, tc := range []struct {
		name           string
		holder, waiter *component.Mutex
		queued         func() bool // the waiter is waiting
	}{
		{"fair waits for unfair", mUnfair, mFair, func() bool {
			return slices.ContainsFunc(queueOf(t, fair, key+"handed"), func(id []byte) bool { return bytes.Equal(id, tab(fair).id) })
		}},
		// (an unfair driver does not queue in the row: its Mutex counts it)
		{"unfair waits for fair", mFair, mUnfair, func() bool { return mUnfair.Waiters("handed") == 1 }},
	} {
		l, err := tc.holder.Acquire(ctx, "handed")
		if err != nil {
			t.Fatalf("%s: holder Acquire: %v", tc.name, err)
		}
		got := make(chan error, 1)
		go func() {
			wl, err := tc.waiter.Acquire(ctx, "handed", component.WithTimeout(3*time.Second))
			if err == nil {
				_, err = wl.Release(ctx)
			}
			got <- err
		}()
		waitFor(t, 10*time.Second, tc.name+": the waiter waiting", tc.queued)
		if ok, err := l.Release(ctx); !ok || err != nil {
			t.Fatalf("%s: Release = %v, %v", tc.name, ok, err)
		}
		if err := <-got; err != nil {
			t.Errorf("%s: waiter: %v", tc.name, err)
		}
	}

	const workers, turns = 2, 10
	var (
		mu        sync.Mutex
		holding   bool
		lastFence uint64
		wg        sync.WaitGroup
	)
	for _, m := range []*component.Mutex{mFair, mUnfair} {
		for range workers {
			wg.Go(func() {
				for range turns {
					l, err := m.Acquire(ctx, "shared", component.WithTimeout(20*time.Second))
					if err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					mu.Lock()
					if holding {
						t.Errorf("fence %d granted while another worker holds the lock", l.Fence())
					}
					if l.Fence() <= lastFence {
						t.Errorf("fence %d after %d", l.Fence(), lastFence)
					}
					holding, lastFence = true, l.Fence()
					mu.Unlock()
					// the work: a read of the row, which holds this token
					if info, held, err := tab(fair).Inspect(ctx, key+"shared"); err != nil || !held || info.Token != l.Token() {
						t.Errorf("row %+v (held %v, %v); want held by %q", info, held, err, l.Token())
					}
					mu.Lock()
					holding = false
					mu.Unlock()
					if ok, err := l.Release(ctx); !ok || err != nil {
						t.Errorf("Release = %v, %v", ok, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
}
