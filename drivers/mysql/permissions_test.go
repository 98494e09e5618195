package mysql

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestPermissions checks docs/mysql.md's Permissions: a user granted only
// CREATE, SELECT, INSERT, UPDATE and DELETE on the driver's objects, which
// an owner's driver made, uses both modes (every fence source in advisory
// mode): it takes, renews and releases locks, and a second driver's waiting
// Acquire gets the lock once it is released. (CREATE is needed: the
// drivers run CREATE ... IF NOT EXISTS, which checks it.)
func TestPermissions(t *testing.T) {
	ctx := ctxT(t)
	admin := openDB(t, testutil.MySQLDSN())
	cfg, err := gomysql.ParseDSN(testutil.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	suffix := strings.ToLower(rand.Text()[:8])
	user := "mutexfx_app_" + suffix
	pw := "pw_" + suffix
	locks, fence := "mutexfx_locks_perm_"+suffix, "mutexfx_fence_perm_"+suffix
	objects := []string{locks, locks + "_floor", fence + "_seq", fence + "_seq_holder", fence + "_ctr", fence + "_uuid_holder"}
	if _, err := admin.ExecContext(ctx, "CREATE USER '"+user+"'@'%' IDENTIFIED BY '"+pw+"'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the drivers close (cleanups run last first)
		ctx := context.Background()
		for _, o := range objects {
			_, _ = admin.ExecContext(ctx, "DROP SEQUENCE IF EXISTS "+o)
			_, _ = admin.ExecContext(ctx, "DROP TABLE IF EXISTS "+o)
		}
		if _, err := admin.ExecContext(ctx, "DROP USER '"+user+"'@'%'"); err != nil {
			t.Errorf("DROP USER: %v", err)
		}
	})
	modes := []struct {
		name string
		opts Options
	}{
		{"advisory/auto", Options{FenceTable: fence + "_seq"}}, // a sequence on MariaDB
		{"advisory/counter", Options{FenceTable: fence + "_ctr", Fence: "counter"}},
		{"advisory/uuid_short", Options{FenceTable: fence + "_uuid", Fence: FenceUUIDShort}},
		{"table", Options{Mode: ModeTable, Table: locks}},
	}
	// the owner makes the objects: one call of each driver
	for _, m := range modes {
		o := m.opts
		o.DSN = testutil.MySQLDSN()
		d := openDriver(t, o)
		key := "perm:owner:" + runID
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "owner", TTL: time.Second}); err != nil || !res.Acquired {
			t.Fatalf("%s: owner's Acquire = %+v, %v", m.name, res, err)
		}
		if ok, err := d.Release(ctx, key, "owner"); err != nil || !ok {
			t.Fatalf("%s: owner's Release = %v, %v", m.name, ok, err)
		}
	}
	for _, o := range objects {
		var n int
		if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", o).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			continue // not made by this server's fence sources
		}
		if _, err := admin.ExecContext(ctx, "GRANT CREATE, SELECT, INSERT, UPDATE, DELETE ON "+o+" TO '"+user+"'@'%'"); err != nil {
			t.Fatalf("GRANT on %s: %v", o, err)
		}
	}
	app := cfg.Clone()
	app.User, app.Passwd = user, pw
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			o := m.opts
			o.DSN = app.FormatDSN()
			a, b := openDriver(t, o), openDriver(t, o)
			key := "perm:" + runID + ":" + m.name
			first, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Minute})
			if err != nil || !first.Acquired || first.Fence == 0 {
				t.Fatalf("Acquire = %+v, %v", first, err)
			}
			if r := a.Renew(ctx, []drivers.Lease{{Key: key, Token: "a", TTL: time.Minute}}); !r[0].Held || r[0].Err != nil {
				t.Fatalf("Renew = %+v", r)
			}
			sqltest.PassOn(ctx, t, a, b, key, first.Fence, nil)
		})
	}
}
