package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestTableFairWindow checks, with single driver calls, that a driver
// releasing a table lock another driver waited for does not retake it
// within FairWindow, while the waiter (or anyone else) takes it at once.
func TestTableFairWindow(t *testing.T) {
	const window = 2 * time.Second // long enough that a loaded machine stays inside it
	cases := []struct {
		name        string
		window      time.Duration
		otherWaited bool // the other driver failed once while a held it
		sameWaited  bool // a's own second attempt failed while a held it
		retake      bool // a's acquisition right after its release succeeds
	}{
		{"other driver waited: releaser refused", window, true, false, false},
		{"nobody waited: releaser retakes", window, false, false, true},
		{"only the releaser's own driver waited: retakes", window, false, true, true},
		{"fairness off: releaser retakes", -1, true, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			a := shared(t, Options{Mode: ModeTable, FairWindow: tc.window})
			b := shared(t, Options{Mode: ModeTable, FairWindow: tc.window})
			key := fmt.Sprintf("fair:%s:%d", t.Name(), time.Now().UnixNano())
			take := func(d *Driver, tok string) drivers.AcquireResult {
				t.Helper()
				res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute})
				if err != nil {
					t.Fatalf("Acquire(%s): %v", tok, err)
				}
				return res
			}
			if res := take(a, "a1"); !res.Acquired {
				t.Fatalf("first Acquire = %+v; want acquired", res)
			}
			if tc.otherWaited {
				if res := take(b, "b1"); res.Acquired {
					t.Fatal("b acquired a held lock")
				}
			}
			if tc.sameWaited {
				if res := take(a, "a-waiter"); res.Acquired {
					t.Fatal("a acquired its own held lock twice")
				}
			}
			if ok, err := a.Release(ctx, key, "a1"); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			res := take(a, "a2")
			if res.Acquired != tc.retake {
				t.Fatalf("releaser's Acquire = %+v; want acquired %v", res, tc.retake)
			}
			if !tc.retake {
				if res.HolderTTL <= 0 || res.HolderTTL > window {
					t.Fatalf("refused with HolderTTL %v; want the rest of the %v window", res.HolderTTL, window)
				}
				// the waiter takes it at once, and its holding starts a new
				// round: a's failed attempt now marks the row for a
				got := take(b, "b2")
				if !got.Acquired {
					t.Fatalf("waiter's Acquire = %+v; want acquired", got)
				}
				if again := take(a, "a3"); again.Acquired {
					t.Fatal("a acquired the lock b holds")
				}
				if ok, err := b.Release(ctx, key, "b2"); err != nil || !ok {
					t.Fatalf("b Release = %v, %v", ok, err)
				}
				if again := take(b, "b3"); again.Acquired {
					t.Fatal("b retook within the window the lock a waited for")
				}
				if again := take(a, "a4"); !again.Acquired || again.Fence <= got.Fence {
					t.Fatalf("a's Acquire after b's release = %+v; want acquired with a fence above %d", again, got.Fence)
				}
			}
		})
	}
}

// TestTableFairWindowExpires checks that a waiter that gave up costs the
// releasing driver one window, no more.
func TestTableFairWindowExpires(t *testing.T) {
	ctx := ctxT(t)
	const window = 300 * time.Millisecond
	a := shared(t, Options{Mode: ModeTable, FairWindow: window})
	b := shared(t, Options{Mode: ModeTable, FairWindow: window})
	key := fmt.Sprintf("fair:expires:%d", time.Now().UnixNano())
	req := func(tok string) drivers.AcquireRequest {
		return drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}
	}
	if res, err := a.Acquire(ctx, req("a1")); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	if res, err := b.Acquire(ctx, req("b1")); err != nil || res.Acquired {
		t.Fatalf("b Acquire = %+v, %v; want taken", res, err)
	}
	if ok, err := a.Release(ctx, key, "a1"); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	released := time.Now()
	// b never comes back: a gets the lock once the window is over
	took := within(t, 5*time.Second, "the releaser retakes after the window", func() bool {
		res, err := a.Acquire(ctx, req("a2"))
		if err != nil {
			t.Fatal(err)
		}
		return res.Acquired
	})
	if took < window-50*time.Millisecond {
		t.Fatalf("retaken %v after the release; want after the %v window", took, window)
	}
	t.Logf("retaken %v after the release (window %v)", time.Since(released), window)
}

// TestTableNoBarging runs two components on two drivers (as two processes
// would) taking one lock in turn with a short hold: with FairWindow each
// release hands the lock to the other side's waiter, so the lock alternates
// between the drivers instead of staying with the releasing one.
func TestTableNoBarging(t *testing.T) {
	ctx := ctxT(t)
	name := fmt.Sprintf("nobarge-%d", time.Now().UnixNano())
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	const rounds = 20
	for side := range 2 {
		m := mutexOn(t, shared(t, Options{Mode: ModeTable}), 10*time.Second)
		wg.Go(func() {
			for range rounds {
				l, err := m.Acquire(ctx, name, component.WithTimeout(20*time.Second))
				if err != nil {
					t.Errorf("side %d: %v", side, err)
					return
				}
				mu.Lock()
				order = append(order, side)
				mu.Unlock()
				time.Sleep(time.Millisecond) // the work the lock guards
				if ok, err := l.Release(ctx); !ok || err != nil {
					t.Errorf("side %d: Release = %v, %v", side, ok, err)
				}
			}
		})
	}
	wg.Wait()
	// count the hand-overs between sides; barging would give a
	// handful (each side keeps the lock for most of its rounds)
	switches := 0
	for i := 1; i < len(order); i++ {
		if order[i] != order[i-1] {
			switches++
		}
	}
	t.Logf("order %v: %d switches", order, switches)
	if switches < len(order)*3/4 {
		t.Fatalf("%d switches in %d acquisitions; want the lock to alternate (≥ %d)", switches, len(order), len(order)*3/4)
	}
}

// TestTableSchemaUpgrade checks that a lock table created without the
// fairness columns (owner, wanted_at) gets them at first use.
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
	var owner string
	if err := c.QueryRow(ctx, "SELECT owner FROM "+table).Scan(&owner); err != nil || owner != d.id {
		t.Fatalf("owner = %q, %v; want the driver's id %q", owner, err, d.id)
	}
}
