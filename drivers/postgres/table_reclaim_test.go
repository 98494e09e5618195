package postgres

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// reclaimTable opens a table-mode driver on a table of its own, dropped
// when the test ends, and returns it with a count of the table's rows.
func reclaimTable(t *testing.T) (Driver, func() int) {
	t.Helper()
	ctx := ctxT(t)
	table := "mutexfx_reclaim_" + strings.ToLower(rand.Text()[:8])
	admin, err := pgx.Connect(ctx, testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = admin.Exec(ctx, "DROP TABLE IF EXISTS "+table+", "+table+"_boot; DROP SEQUENCE IF EXISTS "+table+"_fence")
		admin.Close(ctx)
	})
	count := func() int {
		var c int
		if err := admin.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	return shared(t, Options{Mode: ModeTable, Table: table}), count
}

// TestTableReclaim: names acquired and released once each leave at most 1 %
// of their rows one ttl after the last release.
func TestTableReclaim(t *testing.T) {
	d, count := reclaimTable(t)
	testutil.CheckReclaim(t, d, count)
}

// TestTableReclaimFences: a name acquired again after its row was
// reclaimed gets a higher fence, also while acquisitions race with
// reclaims.
func TestTableReclaimFences(t *testing.T) {
	d, count := reclaimTable(t)
	ctx := ctxT(t)
	sweep := func(ctx context.Context) error {
		_, err := tableOf(d).reclaimRows(ctx)
		return err
	}
	testutil.FencesAfterReclaim(ctx, t, d, sweep, count)
	testutil.FencesIncrease(ctx, t, d, sweep)
}
