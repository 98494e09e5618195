package mysql

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestGivenUpStatementDoesNotLand: a table-mode Extend that waits for a row
// lock past its call's end is given up by the client (its connection
// closed), but the server goes on waiting for the row while the statement
// runs: with InnoDB's default lock wait of 50 s it would apply the Extend
// once the row is free, long after its caller was told it failed (the
// component bounds how late a failed request may land by the call's end
// plus 1 s). The driver's own sessions wait at most 1 s for a row lock.
func TestGivenUpStatementDoesNotLand(t *testing.T) {
	ctx := ctxT(t)
	const table = "mutexfx_test_late"
	d := openDriver(t, Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: table})
	key, tok, _, tx := heldRowLocked(ctx, t, d, table)
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	ok, err := d.Extend(cctx, key, tok, time.Hour)
	cancel()
	if err == nil {
		t.Fatalf("Extend with the row locked = %v, nil; want its ctx's error", ok)
	}
	// the row stays locked past the 1 s bound, then is freed: a statement
	// the server still ran would apply the hour now
	time.Sleep(1500 * time.Millisecond) // the passing of time is what is tested
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // time for a statement still waiting to land
	info, held, err := d.Inspect(ctx, key)
	if err != nil || !held {
		t.Fatalf("Inspect = %+v, %v, %v", info, held, err)
	}
	if info.TTL > 2*time.Minute {
		t.Fatalf("ttl %v: the given-up Extend (1h) landed after its call failed", info.TTL)
	}
}
