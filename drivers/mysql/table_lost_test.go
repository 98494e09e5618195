package mysql

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestTableTakeAnswerLost: a queued table-mode acquisition whose taking
// statement commits but whose answer the link loses (reset after the
// commit) reads its row back and returns the lock it took. An error would
// have made its component release the lock and ask again as a new arrival:
// the statement that took the lock dropped the waiter's queue entry, so it
// went to the back of the queue.
func TestTableTakeAnswerLost(t *testing.T) {
	ctx := ctxT(t)
	const table = "mutexfx_test_locks"
	opts := Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: table, WaiterLiveness: 10 * time.Second}
	h := openDriver(t, opts)
	// one connection, the one the link loses; its statement waits for x's
	// row lock as long as the test needs (not the driver's 1 s)
	p, dsn := proxiedDSN(t, map[string]string{"innodb_lock_wait_timeout": "30"})
	opts.DSN, opts.MaxOpenConns = dsn, 1
	w := openDriver(t, opts)
	key := "mysqltest:" + runID + ":" + t.Name() + ":" + token()
	hash := sqlkit.KeyHash(key)
	acquire := func(d Driver, tok string) (drivers.AcquireResult, error) {
		return d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute})
	}
	if res, err := acquire(h, "h"); err != nil || !res.Acquired {
		t.Fatalf("h Acquire = %+v, %v", res, err)
	}
	if res, err := acquire(w, "w"); err != nil || res.Acquired {
		t.Fatalf("w Acquire = %+v, %v; want held by h", res, err)
	}
	if q := queueOf(t, h, key); len(q) != 1 || !bytes.Equal(q[0], tab(w).id) {
		t.Fatalf("queue %x; want w's entry alone", q)
	}
	var wid int64
	if err := coreOf(w).db.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&wid); err != nil {
		t.Fatal(err)
	}

	// x frees the row (as a release that wakes no one) and keeps it locked:
	// w's next attempt waits for x's commit, then takes the lock
	admin := openDB(t, testutil.MySQLDSN())
	x, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.Rollback() })
	if _, err := x.ExecContext(ctx, "UPDATE "+table+" SET token = '', expires_at = '1000-01-01 00:00:00' WHERE name_hash = ?", hash); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res drivers.AcquireResult
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := acquire(w, "w")
		answered <- answer{res, err}
	}()
	waitFor(t, 5*time.Second, "w's statement waiting for x", running(ctx, t, admin, "ID = ? AND COMMAND = 'Query'", wid))
	p.Stall()
	if err := x.Commit(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "w's answer held back", func() bool { return p.Blocked() > 0 })
	var tok string
	var fence uint64
	if err := admin.QueryRowContext(ctx, "SELECT token, fence FROM "+table+" WHERE name_hash = ?", hash).Scan(&tok, &fence); err != nil || tok != "w" {
		t.Fatalf("row = %q, %v; want taken by w's statement", tok, err)
	}
	p.Reset() // the answer is lost
	p.Resume()
	got := <-answered
	if got.err != nil || !got.res.Acquired || got.res.Fence != fence {
		t.Fatalf("w Acquire = %+v, %v; want the lock its statement took (fence %d)", got.res, got.err, fence)
	}
	if ok, err := w.Release(ctx, key, "w"); err != nil || !ok {
		t.Fatalf("w Release = %v, %v", ok, err)
	}
}

// TestTableHandoverAnswerLost: a Release handing the lock to a waiter of
// the same Mutex whose handover UPDATE commits but whose answer the link
// loses leaves the waiter to get the lock at once (sqltest).
func TestTableHandoverAnswerLost(t *testing.T) {
	// ttl: no periodic renewal (every ttl/3) runs on the one connection,
	// where it could be the UPDATE found waiting for the row lock
	const table, ttl = "mutexfx_test_locks", 60 * time.Second
	// one connection, the one the link loses; its statement waits for the
	// test's row lock as long as the test needs (not the driver's 1 s)
	p, dsn := proxiedDSN(t, map[string]string{"innodb_lock_wait_timeout": "30"})
	w := openDriver(t, Options{DSN: dsn, Mode: ModeTable, Table: table, MaxOpenConns: 1})
	admin := openDB(t, testutil.MySQLDSN())
	sqltest.HandoverAnswerLost(ctxT(t), t, sqltest.LostHandover{
		Driver: w,
		Prefix: "mysqltest:" + runID + ":" + t.Name() + ":",
		Name:   "handlost",
		Proxy:  p,
		TTL:    ttl,
		LockRow: func(ctx context.Context, key string) (func() error, func() bool) {
			var wid int64
			if err := coreOf(w).db.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&wid); err != nil {
				t.Fatal(err)
			}
			return lockRow(ctx, t, admin, table, key).Commit, running(ctx, t, admin, "ID = ? AND COMMAND = 'Query' AND INFO LIKE 'UPDATE%LAST_INSERT_ID(IF(queue%'", wid) // the handover
		},
		Token: func(ctx context.Context, key string) (tok string, err error) {
			err = admin.QueryRowContext(ctx, "SELECT COALESCE((SELECT token FROM "+table+
				" WHERE name_hash = ? AND expires_at >= UTC_TIMESTAMP(6)), '')", sqlkit.KeyHash(key)).Scan(&tok)
			return tok, err
		},
	})
}
