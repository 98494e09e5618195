package postgres

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
)

// TestTableReclaim checks the reclaimer (sqltest.Reclaim), each subtest
// on a table of its own, dropped when it ends.
func TestTableReclaim(t *testing.T) {
	sqltest.Reclaim(t, func(t *testing.T) sqltest.ReclaimTable {
		table := "mutexfx_reclaim_" + strings.ToLower(rand.Text()[:8])
		admin := connectT(t)
		t.Cleanup(func() {
			_, _ = admin.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_boot; DROP SEQUENCE IF EXISTS "+table+"_fence")
		})
		d := shared(t, Options{Mode: ModeTable, Table: table})
		return sqltest.ReclaimTable{
			Driver: d,
			Rows: func() (n int, err error) {
				err = admin.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n)
				return n, err
			},
			Sweep: func(ctx context.Context) error { _, err := tableOf(d).reclaimRows(ctx); return err },
		}
	})
}
