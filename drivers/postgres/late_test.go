package postgres

import (
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
)

// TestGivenUpStatementDoesNotLand: a table-mode Extend waiting for a row
// lock past its call's end is not applied once the row frees (pgx ends the
// statement with its call).
func TestGivenUpStatementDoesNotLand(t *testing.T) {
	ctx := ctxT(t)
	d := shared(t, Options{Mode: ModeTable, Table: "mutexfx_locks_late"})
	key, tok := "late:"+t.Name()+":"+time.Now().Format(time.RFC3339Nano), "t0"
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	tx, err := connectT(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+baseOf(d).names.table+" WHERE id = $1 FOR UPDATE", sqlkit.KeyHash(key)); err != nil {
		t.Fatal(err)
	}
	sqltest.GivenUpExtendDoesNotLand(ctx, t, d, key, tok, func() error { return tx.Rollback(ctx) })
}
