package mysql

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// serverAutocommitOff (TestFaults): on a server whose sessions start with
// autocommit=0 (its configuration, or init_connect), the driver's own pool
// still commits every statement. Before, table mode's statements stayed in
// open transactions: a released lock stayed row-locked for everyone else,
// and its fence rolled back when the connection closed; the advisory
// counter fence's row the same.
func serverAutocommitOff(t *testing.T, srv *testutil.MariaDB, admin *sql.DB) {
	ctx := ctxT(t)
	for _, q := range []string{"SET GLOBAL autocommit = 0", "SET GLOBAL innodb_lock_wait_timeout = 2"} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, q := range []string{"SET GLOBAL autocommit = 1", "SET GLOBAL innodb_lock_wait_timeout = DEFAULT"} {
			if _, err := admin.ExecContext(context.Background(), q); err != nil {
				t.Error(err)
			}
		}
	})
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"Table", Options{DSN: srv.DSN(), Mode: ModeTable, Retries: -1}},
		{"AdvisoryCounter", Options{DSN: srv.DSN(), Fence: FenceCounter, FenceTable: "autocommit_counter", Retries: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t)
			d1, d2 := openDriver(t, c.opts), openDriver(t, c.opts)
			key := "autocommit-" + c.name
			// acquire takes and releases the lock with d and returns its fence.
			acquire := func(name string, d Driver) uint64 {
				t.Helper()
				tok := token()
				res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute})
				if err != nil || !res.Acquired {
					t.Fatalf("%s: Acquire = %+v, %v", name, res, err)
				}
				if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
					t.Fatalf("%s: Release = %v, %v", name, ok, err)
				}
				return res.Fence
			}
			f1 := acquire("d1", d1)
			f2 := acquire("d2 after d1's release", d2) // the released lock is free for others
			d1.Close(ctx)                              // a transaction left open would roll back now
			f3 := acquire("d2 after d1 closed", d2)
			if f2 <= f1 || f3 <= f2 {
				t.Fatalf("fences %d, %d, %d; want them growing", f1, f2, f3)
			}
		})
	}
}

// TestAutocommitForced: the own pool's sessions set autocommit=1 whatever
// the DSN says, in any case.
func TestAutocommitForced(t *testing.T) {
	s, err := Options{}.validate()
	if err != nil {
		t.Fatal(err)
	}
	for _, dsn := range []string{"root@tcp(127.0.0.1:3306)/test", "root@tcp(127.0.0.1:3306)/test?AutoCommit=0"} {
		cfg, err := Options{DSN: dsn}.mysqlConfig(s)
		if err != nil {
			t.Fatal(err)
		}
		var set []string
		for k, v := range cfg.Params {
			if strings.EqualFold(k, "autocommit") {
				set = append(set, k+"="+v)
			}
		}
		if len(set) != 1 || set[0] != "autocommit=1" {
			t.Errorf("DSN %q: the session sets %v; want autocommit=1 alone", dsn, set)
		}
	}
}
