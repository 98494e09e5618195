package mysql

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestTableReclaim checks the reclaimer (sqltest.Reclaim), each subtest
// on a table of its own, dropped when it ends.
func TestTableReclaim(t *testing.T) {
	sqltest.Reclaim(t, func(t *testing.T) sqltest.ReclaimTable {
		table := "mutexfx_reclaim_" + strings.ToLower(rand.Text()[:8])
		admin := openDB(t, testutil.MySQLDSN())
		t.Cleanup(func() {
			if _, err := admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+floorSuffix); err != nil {
				t.Error(err)
			}
		})
		d := openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: table})
		return sqltest.ReclaimTable{
			Driver: d,
			Rows: func() (n int, err error) {
				err = admin.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(&n)
				return n, err
			},
			Sweep: func(ctx context.Context) error { _, err := tab(d).reclaimRows(ctx); return err },
		}
	})
}
