package mysql

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestRetriesLockWaitTimeout: a renewal meeting a row lock held past
// innodb_lock_wait_timeout (error 1205) is retried and then succeeds; with
// retries off the error comes back.
func TestRetriesLockWaitTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		retries int
	}{{"default", 0}, {"off", -1}} {
		t.Run(tc.name, func(t *testing.T) { testRetry(t, tc.retries) })
	}
}

func testRetry(t *testing.T, retries int) {
	ctx := ctxT(t)
	const table = "mutexfx_test_locks"
	d := openDriver(t, Options{DSN: testutil.MySQLDSN() + "?innodb_lock_wait_timeout=1", Mode: ModeTable, Table: table, Retries: retries})
	key, tok, _, tx := heldRowLocked(ctx, t, d, table)
	start := time.Now()
	done := drivertest.ExtendAsync(ctx, d, key, tok, time.Minute)
	defer func() {
		if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
			t.Errorf("Release = %v, %v", ok, err)
		}
	}()
	if retries < 0 {
		if r := <-done; r.Err == nil || !retryable(r.Err) {
			t.Fatalf("Extend without retries = %v, %v; want error 1205", r.Held, r.Err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		return
	}
	// Hold the row lock past the first attempt's 1 s lock wait timeout
	// (the passing of time is what is tested), then let the retry through.
	select {
	case r := <-done:
		t.Fatalf("Extend returned %v, %v while the row was locked", r.Held, r.Err)
	case <-time.After(1500 * time.Millisecond):
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.Err != nil || !r.Held {
		t.Fatalf("Extend = %v, %v; want true after a retry", r.Held, r.Err)
	}
	if e := time.Since(start); e < time.Second {
		t.Fatalf("Extend succeeded after %v, before the first attempt's lock wait timeout", e)
	}
}

// TestRetriesKilledQuery: a table-mode statement interrupted by an
// operator's KILL QUERY (error 1317) while its call goes on is run again:
// the Extend that was waiting for a row lock waits again, and succeeds
// once the row is free. Before, it failed with the interruption.
func TestRetriesKilledQuery(t *testing.T) {
	ctx := ctxT(t)
	const table = "mutexfx_test_killed"
	d := openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: table})
	key, tok, admin, tx := heldRowLocked(ctx, t, d, table)
	done := make(chan error, 1)
	go func() {
		ok, err := d.Extend(ctx, key, tok, time.Minute)
		if err == nil && !ok {
			err = errors.New("not held")
		}
		done <- err
	}()
	// waiting returns the id of a connection whose UPDATE of the table
	// started after since (MariaDB's TIME_MS: how long it has run)
	waiting := func(since time.Time) (id int64) {
		waitFor(t, 5*time.Second, "an UPDATE waiting for the row", func() bool {
			err := admin.QueryRowContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() "+
				"AND INFO LIKE ? AND TIME_MS < ? LIMIT 1", "UPDATE `"+table+"`%", time.Since(since).Milliseconds()).Scan(&id)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				t.Fatal(err)
			}
			return err == nil
		})
		return id
	}
	id := waiting(time.Time{})
	killed := time.Now()
	if _, err := admin.ExecContext(ctx, "KILL QUERY ?", id); err != nil {
		t.Fatal(err)
	}
	waiting(killed) // the statement, run again after the kill
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Extend after a KILL QUERY: %v", err)
	}
	if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
}

// heldRowLocked acquires a new key on d, in table mode on table, and locks
// its row in a transaction of admin, a pool of its own: d's statements on
// the row wait until tx ends (rolled back when the test ends).
func heldRowLocked(ctx context.Context, t *testing.T, d Driver, table string) (key, tok string, admin *sql.DB, tx *sql.Tx) {
	t.Helper()
	key, tok = "mysqltest:"+runID+":"+t.Name()+":"+token(), token()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	admin = openDB(t, testutil.MySQLDSN())
	return key, tok, admin, lockRow(ctx, t, admin, table, key)
}

// lockRow locks key's row of table, which must exist, in a transaction of
// admin that changes nothing (rolled back when the test ends).
func lockRow(ctx context.Context, t *testing.T, admin *sql.DB, table, key string) *sql.Tx {
	t.Helper()
	tx, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	var fence uint64
	if err := tx.QueryRowContext(ctx, "SELECT fence FROM "+table+" WHERE name_hash = ? FOR UPDATE", sqlkit.KeyHash(key)).Scan(&fence); err != nil {
		t.Fatal(err)
	}
	return tx
}
