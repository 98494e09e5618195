package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// TestGivenUpStatementDoesNotLand: a table-mode Extend that waits for a row
// lock past its call's end must not be applied once the row frees: its
// caller was told it failed, and the component covers a failed request
// landing for 1 s past the call's end only.
func TestGivenUpStatementDoesNotLand(t *testing.T) {
	ctx := ctxT(t)
	d := shared(t, Options{Mode: ModeTable, Table: "mutexfx_locks_late"})
	key, tok := "late:"+t.Name()+":"+time.Now().Format(time.RFC3339Nano), "t0"
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	blocker := connectT(t)
	tx, err := blocker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+baseOf(d).names.table+" WHERE id = $1 FOR UPDATE", rowID(key)); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	ok, err := d.Extend(cctx, key, tok, time.Hour)
	cancel()
	if err == nil {
		t.Fatalf("Extend with the row locked = %v, nil; want its ctx's error", ok)
	}
	time.Sleep(1500 * time.Millisecond) // the passing of time is what is tested
	if err := tx.Rollback(ctx); err != nil {
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
