package mysql

import (
	"bytes"
	"context"
	"fmt"
	"slices"
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
	log := &testutil.StatementLog{}
	d, err := NewWithDB(loggingDB(t, log, false), Options{Mode: ModeTable, Table: "mutexfx_test_locks", PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	other := openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: "mutexfx_test_locks"})
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
