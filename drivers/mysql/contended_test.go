package mysql

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestTableContendedStatements checks the statements of a contended
// table-mode hand-off: a driver that released a row others queue for
// joins the queue in one statement when it asks again, and the queue's
// head tries the plain UPDATE alone, which takes the row once free, and
// asks again in a fast poll (PollInterval/10, less the component's 1 ms).
func TestTableContendedStatements(t *testing.T) {
	ctx := ctxT(t)
	// other's entry stays live between its attempts, however slow the
	// machine: this test is about the statements, not liveness
	const live = 10 * time.Second
	log := &testutil.StatementLog{}
	d, err := NewWithDB(loggingDB(t, log, false), Options{Mode: ModeTable, Table: "mutexfx_test_locks", PollInterval: 100 * time.Millisecond, WaiterLiveness: live})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	other := openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: "mutexfx_test_locks", WaiterLiveness: live})
	key := fmt.Sprintf("contended:%d", time.Now().UnixNano())
	acquire := func(d Driver, tok string) drivers.AcquireResult {
		t.Helper()
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	release := func(d Driver, tok string) {
		t.Helper()
		if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
			t.Fatalf("Release(%s) = %v, %v", tok, ok, err)
		}
	}
	if !acquire(d, "a").Acquired || acquire(other, "b").Acquired {
		t.Fatal("want a held by d, other queued")
	}
	release(d, "a")
	log.Take()
	if res := acquire(d, "a2"); res.Acquired || res.HolderTTL <= 0 {
		t.Fatalf("d's attempt after its release, other queued = %+v; want not taken", res)
	}
	if got := log.Take(); !slices.Equal(got, []string{"INSERT"}) {
		t.Fatalf("d's attempt after its release, other queued: statements %q; want the queueing INSERT alone", got)
	}
	if q := queueOf(t, d, key); len(q) != 2 || !bytes.Equal(q[1], tab(d).id) {
		t.Fatalf("queue %x; want other, then d", q)
	}
	// other takes it; d heads the queue, as its watcher reads
	if !acquire(other, "b").Acquired {
		t.Fatal("the queue's head did not take the free row")
	}
	tab(d).watch.poll(ctx)
	log.Take()
	if res := acquire(d, "a3"); res.Acquired || res.HolderTTL != 9*time.Millisecond {
		t.Fatalf("head's attempt at a held row = %+v; want not taken, HolderTTL 9ms", res)
	}
	if got := log.Take(); !slices.Equal(got, []string{"UPDATE"}) {
		t.Fatalf("head's attempt at a held row: statements %q; want one UPDATE", got)
	}
	release(other, "b")
	if res := acquire(d, "a3"); !res.Acquired {
		t.Fatalf("head's attempt at the released row = %+v; want taken", res)
	}
	if got := log.Take(); !slices.Equal(got, []string{"UPDATE"}) {
		t.Fatalf("head's attempt at the released row: statements %q; want one UPDATE", got)
	}
}

// TestTableContendedForgotten: a driver that releases many keys others
// queue for and never waits itself (so its poller, which forgets stale
// keys, never runs) keeps a bounded number of them in mind.
func TestTableContendedForgotten(t *testing.T) {
	const keys, workers = 1100, 8
	ctx := ctxT(t)
	// a table of its own: its rows keep other's queue entry, so the
	// reclaimer leaves them
	table := "mutexfx_test_contended_" + runID
	admin := openDB(t, testutil.MySQLDSN())
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+floorSuffix); err != nil {
			t.Error(err)
		}
	})
	opts := Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: table}
	d, other := openDriver(t, opts), openDriver(t, opts)
	prefix := "mysqltest:" + t.Name() + ":"
	// each key: d takes it, other queues for it, d releases it
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < keys; i += workers {
				key, tok := prefix+fmt.Sprint(i), token()
				if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
					errs <- fmt.Errorf("d Acquire %d = %+v, %v", i, res, err)
					return
				}
				if res, err := other.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: token(), TTL: time.Minute}); err != nil || res.Acquired {
					errs <- fmt.Errorf("other Acquire %d = %+v, %v; want queued", i, res, err)
					return
				}
				if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
					errs <- fmt.Errorf("d Release %d = %v, %v", i, ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	w := &tab(d).watch
	w.mu.Lock()
	n := len(w.keys)
	w.mu.Unlock()
	if n > maxInterests {
		t.Fatalf("d keeps %d keys it released to others in mind; want at most %d", n, maxInterests)
	}
}
