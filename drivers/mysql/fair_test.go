package mysql

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
	"github.com/mutexfx/mutexfx/internal/poll"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestTableReservation: in table mode a driver that releases a lock another
// driver waits for cannot take it again until the waiter took it (or gave
// up for WaiterLiveness); with fair hand-off off it can.
func TestTableReservation(t *testing.T) {
	const liveness = 200 * time.Millisecond
	type step struct {
		who      string // "a" or "b"
		op       string // "acquire", "release", "pause"
		acquired bool   // acquire: expected outcome
	}
	for _, tc := range []struct {
		name     string
		liveness time.Duration
		steps    []step
	}{
		{"releaser yields to the waiter", liveness, []step{
			{"a", "acquire", true}, {"b", "acquire", false}, {"a", "release", false},
			{"a", "acquire", false}, {"b", "acquire", true},
			// b took it as the head of the queue: b may not retake it at
			// once either, a (waiting) may
			{"b", "release", false}, {"b", "acquire", false}, {"a", "acquire", true}, {"a", "release", false},
		}},
		{"a waiter that stops asking loses its turn", liveness, []step{
			{"a", "acquire", true}, {"b", "acquire", false}, {"a", "release", false},
			{"a", "pause", false}, {"a", "acquire", true},
		}},
		{"no waiter, no delay", liveness, []step{
			{"a", "acquire", true}, {"a", "release", false}, {"a", "acquire", true}, {"a", "release", false}, {"b", "acquire", true},
		}},
		{"fair hand-off off", -1, []step{
			{"a", "acquire", true}, {"b", "acquire", false}, {"a", "release", false}, {"a", "acquire", true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			opts := Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: "mutexfx_test_locks", WaiterLiveness: tc.liveness}
			ds := map[string]Driver{"a": openDriver(t, opts), "b": openDriver(t, opts)}
			tokens := map[string]string{}
			key := "mysqltest:" + runID + ":" + t.Name() + ":" + token() // -count: a lock of each run
			for i, s := range tc.steps {
				d := ds[s.who]
				switch s.op {
				case "acquire":
					tok := token()
					res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 10 * time.Second})
					if err != nil || res.Acquired != s.acquired {
						t.Fatalf("step %d: %s acquire = %+v, %v; want acquired %v", i, s.who, res, err, s.acquired)
					}
					if res.Acquired {
						tokens[s.who] = tok
					} else if res.HolderTTL <= 0 || res.HolderTTL > 10*time.Second {
						t.Fatalf("step %d: HolderTTL %v", i, res.HolderTTL)
					}
				case "release":
					if ok, err := d.Release(ctx, key, tokens[s.who]); err != nil || !ok {
						t.Fatalf("step %d: %s release = %v, %v", i, s.who, ok, err)
					}
				case "pause": // until the other's queue entry is dead by the server's clock
					waitFor(t, 10*time.Second, "a dead entry at the queue's head", func() bool {
						st, err := tab(d).watch.read(ctx, []string{key})
						return err == nil && st[0].lead > 0
					})
				}
			}
		})
	}
}

// TestTableFairHandoff: workers on separate drivers and components (as in
// separate processes), each asking again right after releasing, take turns
// instead of one of them keeping the lock. A holder keeps the lock until
// every other worker still taking turns is queued in the row.
func TestTableFairHandoff(t *testing.T) {
	const workers, turns = 3, 15
	ctx := ctxT(t)
	ds := make([]Driver, workers)
	ms := make([]*component.Mutex, workers)
	for i := range ms {
		ds[i] = openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: "mutexfx_test_locks"})
		ms[i] = mutexOn(t, ds[i], 10*time.Second)
	}
	key := "mysqltest:" + runID + ":" + t.Name() + ":handoff"
	order := sqltest.TakeTurns(ctx, t, ms, "handoff", turns, func(holder, w int) bool {
		return slices.ContainsFunc(queueOf(t, ds[holder], key), func(id []byte) bool { return bytes.Equal(id, tab(ds[w]).id) })
	})
	if t.Failed() {
		return
	}
	longest, run := 0, 0
	for i := range order {
		if i > 0 && order[i] == order[i-1] {
			run++
		} else {
			run = 1
		}
		longest = max(longest, run)
	}
	t.Logf("order %v", order)
	if longest > 3 {
		t.Errorf("a worker took the lock %d times in a row: order %v", longest, order)
	}
}

// TestTableMigration: a lock table created by an earlier version (without
// the fair hand-off columns) gets them and works.
func TestTableMigration(t *testing.T) {
	ctx := ctxT(t)
	db := openDB(t, testutil.MySQLDSN())
	table := "mutexfx_test_old_" + runID
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+` (name_hash BINARY(32) NOT NULL, token VARBINARY(255) NOT NULL,
 fence BIGINT UNSIGNED NOT NULL, expires_at DATETIME(6) NOT NULL, name MEDIUMBLOB NOT NULL, PRIMARY KEY (name_hash)) ENGINE=InnoDB`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.ExecContext(context.Background(), "DROP TABLE "+table) })
	for _, name := range []string{table, "test." + table} {
		d := openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: name})
		key, tok := "mysqltest:"+runID+":migrate", token()
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Second}); err != nil || !res.Acquired {
			t.Fatalf("%s: Acquire = %+v, %v", name, res, err)
		}
		if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
			t.Fatalf("%s: Release = %v, %v", name, ok, err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?
 AND COLUMN_NAME IN ('taken_by', 'queue')`, table).Scan(&n); err != nil || n != 2 {
		t.Fatalf("fair hand-off columns: %d, %v; want 2", n, err)
	}
}

// TestTableQueuePrepared: with server-side prepared statements (and so
// with a given pool without interpolateParams) the poller finds this
// driver in a queue and its own hold, though its binary id is no valid
// UTF-8.
func TestTableQueuePrepared(t *testing.T) {
	ctx := ctxT(t)
	opts := Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: "mutexfx_test_locks", WaiterLiveness: 10 * time.Second, PreparedStatements: true}
	d1, d2 := openDriver(t, opts), openDriver(t, opts)
	// ids whose bytes are no valid UTF-8 (0xff never is)
	tab(d1).id[0], tab(d2).id[0] = 0xff, 0xff
	key := "mysqltest:" + runID + ":" + t.Name()
	tok := token()
	if res, err := d1.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("d1 Acquire = %+v, %v", res, err)
	}
	if res, err := d2.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: token(), TTL: time.Minute}); err != nil || res.Acquired {
		t.Fatalf("d2 Acquire = %+v, %v; want not acquired (queued)", res, err)
	}
	st, err := tab(d2).watch.read(ctx, []string{key})
	if err != nil {
		t.Fatal(err)
	}
	if st[0].pos != 0 || st[0].n != 1 {
		t.Fatalf("d2's poll: %+v; want d2 at place 0 of 1", st[0])
	}
	st, err = tab(d1).watch.read(ctx, []string{key})
	if err != nil {
		t.Fatal(err)
	}
	if !st[0].mineHeld || st[0].pos != -1 {
		t.Fatalf("d1's poll: %+v; want held by d1, d1 not queued", st[0])
	}
	// d2, at the head, takes the released lock, then (no longer waiting)
	// takes it again by the plain UPDATE: both record d2 as the taker.
	if ok, err := d1.Release(ctx, key, tok); err != nil || !ok {
		t.Fatalf("d1 Release = %v, %v", ok, err)
	}
	for i := range 2 {
		tok2 := token()
		if res, err := d2.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok2, TTL: time.Minute}); err != nil || !res.Acquired {
			t.Fatalf("d2 Acquire %d = %+v, %v", i, res, err)
		}
		if st, err = tab(d2).watch.read(ctx, []string{key}); err != nil || !st[0].mineHeld || st[0].n != 0 {
			t.Fatalf("d2's poll after acquisition %d: %+v, %v; want held by d2, nobody queued", i, st, err)
		}
		if ok, err := d2.Release(ctx, key, tok2); err != nil || !ok {
			t.Fatalf("d2 Release = %v, %v", ok, err)
		}
	}
}

// TestTableSlowPollKeepsPlace: with a PollInterval far above
// WaiterLiveness/2, a component waiting (subscribed, its retries backing
// off past the liveness) still has its queue entry stamped in time: the
// watcher prompts it when the stamp falls due, not only every
// PollInterval. The entry never lapses, and a driver arriving later does
// not take the freed lock first. (Paced by PollInterval alone, the entry
// lapsed and the newcomer overtook.)
func TestTableSlowPollKeepsPlace(t *testing.T) {
	ctx := ctxT(t)
	const table = "mutexfx_r3_slowpoll"
	admin := openDB(t, testutil.MySQLDSN())
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+floorSuffix)
	})
	opts := Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: table, PollInterval: time.Second} // liveness: default 100ms
	h, x := openDriver(t, opts), openDriver(t, opts)
	wd := openDriver(t, opts)
	w := mutexOn(t, wd, 10*time.Second)
	key := w.Prefix() + "k"

	tokH := token()
	if res, err := h.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tokH, TTL: 30 * time.Second}); err != nil || !res.Acquired {
		t.Fatalf("h acquire = %+v, %v", res, err)
	}
	type got struct {
		l   *component.Lock
		err error
	}
	done := make(chan got, 1)
	go func() {
		l, err := w.Acquire(ctx, "k", component.WithTimeout(20*time.Second))
		done <- got{l, err}
	}()
	waitFor(t, 5*time.Second, "w queued", func() bool {
		q := queueOf(t, h, key)
		return len(q) == 1 && bytes.Equal(q[0], tab(wd).id)
	})
	// w's entry, by the server's clock, over the component's quick retries
	// and well past them
	dead := func() bool {
		var d bool
		err := admin.QueryRowContext(ctx, "SELECT LENGTH(queue) >= 29 AND SUBSTRING(queue, 17, 13) < "+stampSQL(100)+
			" FROM "+table+" WHERE name_hash = ?", sqlkit.KeyHash(key)).Scan(&d)
		return err == nil && d
	}
	if poll.Until(2*time.Second, 5*time.Millisecond, dead) {
		t.Fatal("w's queue entry lapsed while it waited")
	}
	select {
	case g := <-done:
		t.Fatalf("w's wait ended early: %v, %v", g.l, g.err)
	default:
	}
	if ok, err := h.Release(ctx, key, tokH); err != nil || !ok {
		t.Fatalf("h release = %v, %v", ok, err)
	}
	res, err := x.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: token(), TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Acquired {
		t.Fatalf("x, arriving after w, took the lock while w was waiting and retrying (PollInterval %v, WaiterLiveness %v)",
			opts.PollInterval, DefaultWaiterLiveness)
	}
	g := <-done
	if g.err != nil {
		t.Fatal(g.err)
	}
	_, _ = g.l.Release(ctx)
}
