package drivertest

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// CloseCutsStalledCall checks that Close does not wait past its ctx for a
// call stuck on a stalled link. d reaches its store through a proxy that
// stall stops and whose blocked reports how many of its directions hold
// bytes back. With a lock held, the link stalls and an Extend with a ctx
// that never ends is sent into it; then d.Close with a 300ms ctx must
// return within 2s, and the Extend soon after, reporting the lock not kept:
// false, or an error wrapping errClosed. resume heals the link at the end.
func CloseCutsStalledCall(t *testing.T, d drivers.Driver, errClosed error, stall, resume func(), blocked func() int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key, tok := "closecut:"+rand.Text(), rand.Text()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	stall()
	defer resume()
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		ok, err := d.Extend(context.Background(), key, tok, time.Minute)
		done <- result{ok, err}
	}()
	for blocked() == 0 {
		if ctx.Err() != nil {
			t.Fatal("Extend never reached the stalled link")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cctx, ccancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer ccancel()
	start := time.Now()
	cerr := d.Close(cctx)
	took := time.Since(start)
	t.Logf("Close = %v after %v", cerr, took)
	if took > 2*time.Second {
		t.Fatalf("Close took %v with a 300ms ctx", took)
	}
	select {
	case r := <-done:
		t.Logf("Extend cut by Close = %v, %v", r.ok, r.err)
		if r.ok {
			t.Fatal("Extend cut by Close reports the lock kept")
		}
		if r.err != nil && !errors.Is(r.err, errClosed) {
			t.Fatalf("Extend cut by Close: error %v; want one wrapping %v", r.err, errClosed)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Extend still stuck 2s after Close returned")
	}
}
