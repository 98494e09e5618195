package postgres

import (
	"context"
	"testing"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
)

// TestTableReclaim checks the reclaimer (sqltest.Reclaim).
func TestTableReclaim(t *testing.T) {
	sqltest.Reclaim(t, func(t *testing.T, table string) sqltest.ReclaimTable {
		admin := connectT(t)
		t.Cleanup(func() {
			_, _ = admin.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_boot; DROP SEQUENCE IF EXISTS "+table+"_fence")
		})
		d := tableOf(shared(t, Options{Mode: ModeTable, Table: table}))
		rows := func(n *int) error { return admin.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(n) }
		var waiters []drivers.Driver
		for range 4 {
			waiters = append(waiters, shared(t, Options{Mode: ModeTable, Table: table}))
		}
		return sqltest.ReclaimTable{Driver: d, Rows: rows, Sweep: d.reclaim.Drain, Waiters: waiters, Liveness: WaiterLiveness}
	})
}

// TestTableDropped: a lock table dropped under a running driver is
// created again (sqltest.TableDropped).
func TestTableDropped(t *testing.T) {
	const table = "mutexfx_test_dropped"
	admin := connectT(t)
	drop := func(ctx context.Context) error {
		_, err := admin.Exec(ctx, "DROP TABLE IF EXISTS "+table)
		return err
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP TABLE IF EXISTS "+table+", "+table+"_boot; DROP SEQUENCE IF EXISTS "+table+"_fence")
	})
	sqltest.TableDropped(t, shared(t, Options{Mode: ModeTable, Table: table}), drop)
}
