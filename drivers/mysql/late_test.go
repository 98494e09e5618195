package mysql

import (
	"testing"

	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestGivenUpStatementDoesNotLand: a statement waiting for a row lock goes
// on in the server after its call gave it up (connection closed); with
// InnoDB's default lock wait of 50 s a failed Extend was applied once the
// row freed. The driver's own sessions wait at most 1 s for a row lock.
func TestGivenUpStatementDoesNotLand(t *testing.T) {
	ctx := ctxT(t)
	const table = "mutexfx_test_late"
	d := openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: table})
	key, tok, _, tx := heldRowLocked(ctx, t, d, table)
	sqltest.GivenUpExtendDoesNotLand(ctx, t, d, key, tok, tx.Rollback)
}
