package sqltest

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// GivenUpExtendDoesNotLand checks that a table-mode Extend of key (held by
// tok with a ttl of about a minute), waiting for the row lock another
// session holds when it is called, is not applied once free lets the row
// go 1.5 s after the call failed: its caller was told it failed, and the
// component covers a failed request landing for 1 s past the call's end
// only. A server that goes on running a given-up statement applies it once
// the row is free.
func GivenUpExtendDoesNotLand(ctx context.Context, t *testing.T, d drivers.Driver, key, tok string, free func() error) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	ok, err := d.Extend(cctx, key, tok, time.Hour)
	cancel()
	if err == nil {
		t.Fatalf("Extend with the row locked = %v, nil; want its ctx's error", ok)
	}
	time.Sleep(1500 * time.Millisecond) // the passing of time is what is tested
	if err := free(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // time for a statement still waiting to land
	info, held, err := d.(drivers.Inspector).Inspect(ctx, key)
	if err != nil || !held {
		t.Fatalf("Inspect = %+v, %v, %v", info, held, err)
	}
	if info.TTL > 2*time.Minute {
		t.Fatalf("ttl %v: the given-up Extend (1h) landed after its call failed", info.TTL)
	}
}
