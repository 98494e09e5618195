package mysql

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestTableReclaim checks the reclaimer (sqltest.Reclaim).
func TestTableReclaim(t *testing.T) {
	sqltest.Reclaim(t, func(t *testing.T, table string) sqltest.ReclaimTable {
		admin := openDB(t, testutil.MySQLDSN())
		t.Cleanup(func() {
			if _, err := admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+floorSuffix); err != nil {
				t.Error(err)
			}
		})
		opts := Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: table, WaiterLiveness: time.Second}
		d := tab(openDriver(t, opts))
		rows := func(n *int) error {
			return admin.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM "+table).Scan(n)
		}
		var waiters []drivers.Driver
		for range 4 {
			waiters = append(waiters, openDriver(t, opts))
		}
		return sqltest.ReclaimTable{Driver: d, Rows: rows, Sweep: d.reclaim.Drain, Waiters: waiters, Liveness: opts.WaiterLiveness}
	})
}

// TestTableDropped: a lock table dropped under a running driver is
// created again (sqltest.TableDropped).
func TestTableDropped(t *testing.T) {
	const table = "mutexfx_test_dropped"
	admin := openDB(t, testutil.MySQLDSN())
	drop := func(ctx context.Context) error {
		_, err := admin.ExecContext(ctx, "DROP TABLE IF EXISTS "+table)
		return err
	}
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+floorSuffix)
	})
	sqltest.TableDropped(t, openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: table}), drop)
}
