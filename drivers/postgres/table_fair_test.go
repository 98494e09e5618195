package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestTableQueue checks, with single driver calls, the waiter queue of
// table mode: a driver that waits (Wait > 0) is queued in the row, and a
// free lock goes to the first live waiter only; a TryAcquire (Wait 0) never
// queues.
func TestTableQueue(t *testing.T) {
	cases := []struct {
		name   string
		waitB  time.Duration // b's attempt while a holds: 0 is a TryAcquire
		retake bool          // a's TryAcquire right after its release succeeds
		bWins  bool          // then b's TryAcquire succeeds
	}{
		{"waiter queued: releaser refused, waiter takes it", time.Millisecond, false, true},
		{"TryAcquire does not queue: releaser retakes", 0, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			a, b := shared(t, Options{Mode: ModeTable}), shared(t, Options{Mode: ModeTable})
			key := fmt.Sprintf("queue:%s:%d", t.Name(), time.Now().UnixNano())
			take := func(d Driver, tok string, wait time.Duration) drivers.AcquireResult {
				t.Helper()
				res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute, Wait: wait})
				if err != nil {
					t.Fatalf("Acquire(%s): %v", tok, err)
				}
				return res
			}
			if res := take(a, "a1", 0); !res.Acquired {
				t.Fatalf("first Acquire = %+v; want acquired", res)
			}
			if res := take(b, "b1", tc.waitB); res.Acquired {
				t.Fatal("b acquired a held lock")
			} else if res.HolderTTL <= 0 || res.HolderTTL > time.Minute {
				t.Fatalf("HolderTTL = %v; want the holder's remaining ttl", res.HolderTTL)
			}
			if ok, err := a.Release(ctx, key, "a1"); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			if got := take(a, "a2", 0); got.Acquired != tc.retake {
				t.Fatalf("releaser's TryAcquire = %+v; want acquired %v", got, tc.retake)
			}
			if got := take(b, "b2", 0); got.Acquired != tc.bWins {
				t.Fatalf("waiter's TryAcquire = %+v; want acquired %v", got, tc.bWins)
			}
		})
	}
}

// TestTableQueueDeadWaiter checks that a queued waiter that never comes
// back holds the others up for WaiterLiveness at most.
func TestTableQueueDeadWaiter(t *testing.T) {
	ctx := ctxT(t)
	a, b := shared(t, Options{Mode: ModeTable}), shared(t, Options{Mode: ModeTable})
	key := fmt.Sprintf("queue:dead:%d", time.Now().UnixNano())
	req := func(tok string, wait time.Duration) drivers.AcquireRequest {
		return drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute, Wait: wait}
	}
	if res, err := a.Acquire(ctx, req("a1", 0)); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	// before b's statement: the server stamps b's entry after this, and
	// measuring after its reply came would count the reply's delay too
	queuedAt := time.Now()
	if res, err := b.Acquire(ctx, req("b1", time.Millisecond)); err != nil || res.Acquired {
		t.Fatalf("b Acquire = %+v, %v; want queued, not acquired", res, err)
	}
	if ok, err := a.Release(ctx, key, "a1"); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	// b never comes back: a gets the lock once b's entry is stale
	within(t, 5*time.Second, "the releaser retakes after the waiter's liveness", func() bool {
		res, err := a.Acquire(ctx, req("a2", 0))
		if err != nil {
			t.Fatal(err)
		}
		return res.Acquired
	})
	took := time.Since(queuedAt)
	t.Logf("retaken %v after the waiter's last attempt (liveness %v)", took, WaiterLiveness)
	if took < WaiterLiveness-10*time.Millisecond { // (clock granularity)
		t.Fatalf("retaken %v after the waiter's last attempt; want after %v", took, WaiterLiveness)
	}
}

// TestTableQueueOrder checks that waiting drivers get a table lock in the
// order they queued, whatever order their wake-ups come in.
func TestTableQueueOrder(t *testing.T) {
	ctx := ctxT(t)
	holder := shared(t, Options{Mode: ModeTable})
	key := fmt.Sprintf("queue:order:%d", time.Now().UnixNano())
	if res, err := holder.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "h", TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	c, err := pgx.Connect(ctx, testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	const waiters = 4
	for i := range waiters {
		d := shared(t, Options{Mode: ModeTable})
		wg.Go(func() {
			tok := fmt.Sprint("w", i)
			for {
				res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute, Wait: time.Second})
				if err != nil {
					t.Errorf("waiter %d: %v", i, err)
					return
				}
				if res.Acquired {
					break
				}
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
				t.Errorf("waiter %d: Release = %v, %v", i, ok, err)
			}
		})
		within(t, 5*time.Second, fmt.Sprintf("waiter %d queued", i), func() bool {
			var queued bool
			err := c.QueryRow(ctx, "SELECT queue ? $2 FROM mutexfx_locks WHERE id = $1", sqlkit.KeyHash(key), tableOf(d).id).Scan(&queued)
			return err == nil && queued
		})
	}
	if ok, err := holder.Release(ctx, key, "h"); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("acquisition order %v; want the queue's order", order)
		}
	}
}

// TestTableNoBarging runs two components on two drivers (as two processes
// would) taking one lock in turn: a holder keeps the lock until the other
// side's waiter is queued in the row (or that side is done), so the lock
// alternates between the drivers instead of staying with the releasing one.
func TestTableNoBarging(t *testing.T) {
	ctx := ctxT(t)
	name := fmt.Sprintf("nobarge-%d", time.Now().UnixNano())
	const rounds = 20
	var (
		ids [2]string
		ms  [2]*component.Mutex
	)
	for side := range 2 {
		d := shared(t, Options{Mode: ModeTable})
		ids[side] = tableOf(d).id
		m := mutexOn(t, d, 10*time.Second)
		ms[side] = m
		// connected (pool, schema, boot check) before the rounds start
		// together: a side still connecting would let the other take
		// the lock several times in a row
		warm, err := m.Acquire(ctx, fmt.Sprintf("%s-warm-%d", name, side))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := warm.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c, err := pgx.Connect(ctx, testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	order := sqltest.TakeTurns(ctx, t, ms[:], name, rounds, func(holder, other int) bool {
		var queued bool
		err := c.QueryRow(ctx, "SELECT COALESCE(queue ? $2, false) FROM mutexfx_locks WHERE id = $1", sqlkit.KeyHash("fault:"+name), ids[other]).Scan(&queued)
		if err != nil {
			t.Fatalf("queue of %q: %v", name, err)
		}
		return queued
	})
	// count the hand-overs between sides; barging would give a
	// handful (each side keeps the lock for most of its rounds). With
	// the other side queued at each release, every acquisition switches
	// (39 of 39); the bound leaves room for a waiter whose queue entry
	// died under load.
	switches := 0
	for i := 1; i < len(order); i++ {
		if order[i] != order[i-1] {
			switches++
		}
	}
	t.Logf("order %v: %d switches", order, switches)
	if want := len(order) * 2 / 3; switches < want {
		t.Fatalf("%d switches in %d acquisitions; want the lock to alternate (≥ %d)", switches, len(order), want)
	}
}

// TestTableSchemaUpgrade checks that a lock table created without the
// queue column gets it at first use.
func TestTableSchemaUpgrade(t *testing.T) {
	ctx := ctxT(t)
	c, err := pgx.Connect(ctx, testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	const table = "mutexfx_upgrade_test"
	for _, sql := range []string{
		"DROP TABLE IF EXISTS " + table,
		"CREATE TABLE " + table + " (id bytea PRIMARY KEY, name text NOT NULL, token text NOT NULL, " +
			"fence bigint NOT NULL, expires_at timestamptz NOT NULL)",
	} {
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = c.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) })
	d := shared(t, Options{Mode: ModeTable, Table: table})
	res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "upgrade", Token: "t", TTL: time.Minute})
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire on an old table = %+v, %v", res, err)
	}
	var queue string
	if err := c.QueryRow(ctx, "SELECT queue::text FROM "+table).Scan(&queue); err != nil || queue != "{}" {
		t.Fatalf("queue = %q, %v; want {}", queue, err)
	}
}

// TestTableRowDeletedDuringAcquire deletes a free row in a transaction that
// commits while an acquisition waits on it; the fence must still be taken
// and above the previous one. On the uncontended path the bare UPDATE finds
// the row gone and the acquire statement inserts it anew. With a (dead)
// waiter queued in the row, the acquire statement itself waits: its
// snapshot saw the row (so it took no fence for an insert) but it inserts a
// new row, whose fence refence takes.
func TestTableRowDeletedDuringAcquire(t *testing.T) {
	// The acquisition must wait for the deleting transaction: a session
	// blocked by the admin's backend (pg_blocking_pids), running the
	// statement the case expects. (pg_stat_activity keeps one snapshot per
	// transaction, and the admin polls inside its open one: each poll
	// clears it. Without that, session 5 saw stale statement texts.)
	cases := []struct {
		name    string
		queue   string // the row's queue before the deletion
		waiting string // how the waiting statement starts
	}{
		{"uncontended path", "{}", "UPDATE % AS l SET token = %"},
		{"acquire statement and refence", `{"gone": [0, 0]}`, "WITH %"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			d := shared(t, Options{Mode: ModeTable})
			key := fmt.Sprintf("deleted:%s:%d", tc.name, time.Now().UnixNano())
			first, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "t1", TTL: time.Minute})
			if err != nil || !first.Acquired {
				t.Fatalf("Acquire = %+v, %v", first, err)
			}
			if ok, err := d.Release(ctx, key, "t1"); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			admin, err := pgx.Connect(ctx, testutil.PostgresDSN())
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close(ctx)
			if _, err := admin.Exec(ctx, "UPDATE mutexfx_locks SET queue = $2 WHERE id = $1", sqlkit.KeyHash(key), tc.queue); err != nil {
				t.Fatal(err)
			}
			tx, err := admin.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := tx.Exec(ctx, "DELETE FROM mutexfx_locks WHERE id = $1", sqlkit.KeyHash(key)); err != nil {
				t.Fatal(err)
			}
			got := drivertest.AcquireAsync(ctx, d, drivers.AcquireRequest{Key: key, Token: "t2", TTL: time.Minute})
			within(t, 5*time.Second, "the acquisition waits for the deleting transaction", func() bool {
				// inside tx, pg_stat_activity keeps its first snapshot
				// unless cleared
				if _, err := admin.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
					t.Fatal(err)
				}
				var waiting bool
				err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity "+
					"WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid)) AND query LIKE $1)", tc.waiting).Scan(&waiting)
				return err == nil && waiting
			})
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-got
			if r.Err != nil || !r.Res.Acquired || r.Res.Fence <= first.Fence {
				t.Fatalf("Acquire after the row's deletion = %+v, %v; want acquired with a fence above %d", r.Res, r.Err, first.Fence)
			}
			info, ok, err := d.Inspect(ctx, key)
			if err != nil || !ok || info.Fence != r.Res.Fence {
				t.Fatalf("Inspect = %+v, %v, %v; want the fence %d in the row", info, ok, err, r.Res.Fence)
			}
		})
	}
}

// TestTableReleaseNotifiesWaitersOnly checks that a table release notifies
// only when a driver is queued for the row. NOTIFYs reach listeners in
// commit order, so once the second (waited-for) release is heard, the first
// (uncontended) one would have been heard before it.
func TestTableReleaseNotifiesWaitersOnly(t *testing.T) {
	ctx := ctxT(t)
	a, b := shared(t, Options{Mode: ModeTable}), shared(t, Options{Mode: ModeTable})
	var mu sync.Mutex
	var heard []string
	cancel, err := b.Subscribe(ctx, func(ev drivers.Event) {
		if ev.Kind == drivers.Released {
			mu.Lock()
			heard = append(heard, ev.Key)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	stamp := time.Now().UnixNano()
	within(t, 5*time.Second, "a waited-for release heard", func() bool {
		alone, waited := fmt.Sprintf("notify:alone:%d", stamp), fmt.Sprintf("notify:waited:%d", stamp)
		stamp++
		for _, key := range []string{alone, waited} {
			if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Minute}); err != nil || !res.Acquired {
				t.Fatalf("Acquire %s = %+v, %v", key, res, err)
			}
			if key == waited {
				waitFor(ctx, b, key)
			}
			if ok, err := a.Release(ctx, key, "a"); err != nil || !ok {
				t.Fatalf("Release %s = %v, %v", key, ok, err)
			}
		}
		// the subscription connects in the background: until it does,
		// nothing is heard and the pair is tried again; a release heard
		// is heard by a later poll (NOTIFYs arrive in commit order: an
		// alone key notified would be heard before its waited key)
		mu.Lock()
		defer mu.Unlock()
		for _, k := range heard {
			if strings.HasPrefix(k, "notify:alone:") {
				t.Fatalf("an uncontended release notified: %q", k)
			}
		}
		return slices.Contains(heard, waited)
	})
}
