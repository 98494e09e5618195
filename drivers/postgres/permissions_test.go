package postgres

import (
	"context"
	"crypto/rand"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestPermissions checks docs/postgres.md's Permissions: once a role that
// may create objects has made the schema (with one call of its driver), a
// role that may not, granted only what the docs list, uses both modes: it
// takes, renews, lists and releases locks, a release grants the lock to a
// waiting driver through the functions, and the reclaimer deletes rows.
func TestPermissions(t *testing.T) {
	ctx := ctxT(t)
	admin := connectT(t)
	role := "mutexfx_app_" + strings.ToLower(rand.Text()[:8])
	table := "mutexfx_locks_perm_" + strings.ToLower(rand.Text()[:8])
	dropAll := func() {
		for _, q := range []string{"DROP TABLE IF EXISTS " + table + ", " + table + "_boot",
			"DROP SEQUENCE IF EXISTS " + table + "_fence",
			"DROP FUNCTION IF EXISTS " + table + "_head, " + table + "_after, " + table + "_wake",
			"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := admin.Exec(context.Background(), q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	}
	if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dropAll) // after the drivers close (cleanups run last first)
	var may bool
	if err := admin.QueryRow(ctx, "SELECT has_schema_privilege($1, 'public', 'CREATE')", role).Scan(&may); err != nil || may {
		t.Fatalf("the role may create objects in public (%v, %v): the test needs PostgreSQL 15's default", may, err)
	}

	owner := on(t, testutil.PostgresDSN(), Options{Mode: ModeTable, Table: table})
	if _, err := owner.(drivers.Lister).List(ctx, ""); err != nil { // creates the schema
		t.Fatal(err)
	}
	for _, q := range []string{
		"GRANT USAGE, UPDATE ON SEQUENCE " + table + "_fence TO " + role,
		"GRANT SELECT, INSERT ON " + table + "_boot TO " + role,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON " + table + " TO " + role,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	u, err := url.Parse(testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)

	t.Run(ModeAdvisory, func(t *testing.T) {
		d := on(t, u.String(), Options{Table: table})
		req := drivers.AcquireRequest{Key: "perm:" + rand.Text(), Token: "a", TTL: time.Minute}
		if res, err := d.Acquire(ctx, req); err != nil || !res.Acquired || res.Fence == 0 {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		if ok, err := d.Release(ctx, req.Key, req.Token); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
	})

	t.Run(ModeTable, func(t *testing.T) {
		a, b := on(t, u.String(), Options{Mode: ModeTable, Table: table}), on(t, u.String(), Options{Mode: ModeTable, Table: table})
		key := "perm:" + rand.Text()
		first, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Minute})
		if err != nil || !first.Acquired {
			t.Fatalf("Acquire = %+v, %v", first, err)
		}
		if r := a.Renew(ctx, []drivers.Lease{{Key: key, Token: "a", TTL: time.Minute}}); !r[0].Held || r[0].Err != nil {
			t.Fatalf("Renew = %+v", r)
		}
		if l, err := a.(drivers.Lister).List(ctx, "perm:"); err != nil || len(l) == 0 {
			t.Fatalf("List = %v, %v", l, err)
		}
		sqltest.PassOn(ctx, t, a, b, key, first.Fence, func() {
			testutil.Poll(t, 10*time.Second, "the waiter to register in the queue", func() bool {
				var n int
				err := admin.QueryRow(ctx, "SELECT coalesce(max(jsonb_array_length(e.v)), 0) FROM "+table+
					", jsonb_each(queue) AS e(k, v) WHERE id = $1", sqlkit.KeyHash(key)).Scan(&n)
				return err == nil && n == 5
			})
		})
		// the row is free and nobody queues: the reclaimer may delete it
		if _, err := admin.Exec(ctx, "UPDATE "+table+" SET queue = '{}' WHERE id = $1", sqlkit.KeyHash(key)); err != nil {
			t.Fatal(err)
		}
		if n, err := tableOf(a).reclaimRound(ctx); err != nil || n == 0 {
			t.Fatalf("reclaimRound = %d, %v; want the free row deleted", n, err)
		}
		var left int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&left); err != nil || left != 0 {
			t.Fatalf("rows left: %d, %v", left, err)
		}
	})
}
