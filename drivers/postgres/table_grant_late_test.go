package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// TestTableGrantAsWaitEnds: a grant that reaches a waiting call as the
// call's ctx ends is kept, not dropped with the row left held for nobody.
// The release runs after the call's failed, registered attempt, and the
// ctx is cancelled once the grant is delivered: the wait's select then
// finds both ready and picks one at random, so that over the rounds both
// the select's grant case and the deferred check after ctx.Done run.
// Either way the call returns the lock and the row holds its token.
func TestTableGrantAsWaitEnds(t *testing.T) {
	ctx := ctxT(t)
	opts := Options{Mode: ModeTable}
	a, b := shared(t, opts), shared(t, opts)
	tb := tableOf(b)
	// told of each delivery (set before b's listener starts: it reads the map)
	delivered := make(chan struct{}, 1)
	deliver := tb.granted[grantChannel(tb.id)]
	tb.granted[grantChannel(tb.id)] = func(payload string) {
		deliver(payload)
		select {
		case delivered <- struct{}{}:
		default:
		}
	}
	within(t, 5*time.Second, "registered", func() bool {
		waitFor(ctx, b, "grant:late:warm") // a waiting call starts the listener
		return tb.registration(drivers.AcquireRequest{Token: "b"}) != nil
	})
	defer func(f func(time.Duration) time.Duration) { pollDelay = f }(pollDelay)
	for i := range 16 {
		key := fmt.Sprintf("grant:late:%d:%d", i, time.Now().UnixNano())
		token := fmt.Sprintf("b%d", i)
		first, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Minute})
		if err != nil || !first.Acquired {
			t.Fatalf("Acquire = %+v, %v", first, err)
		}
		wctx, cancel := context.WithCancel(ctx)
		var hookErr error
		pollDelay = func(time.Duration) time.Duration { // after b's failed attempt
			defer cancel()
			if ok, err := a.Release(ctx, key, "a"); err != nil || !ok {
				hookErr = fmt.Errorf("Release = %v, %v", ok, err)
				return time.Hour
			}
			select {
			case <-delivered:
			case <-time.After(10 * time.Second):
				hookErr = fmt.Errorf("no grant delivered to %s", token)
			}
			return time.Hour
		}
		res, err := b.Acquire(wctx, drivers.AcquireRequest{Key: key, Token: token, TTL: time.Minute, Wait: 30 * time.Second})
		cancel()
		if hookErr != nil {
			t.Fatal(hookErr)
		}
		if err != nil || !res.Acquired || res.Fence <= first.Fence {
			t.Fatalf("round %d: waiting Acquire = %+v, %v; want the granted lock, fenced above %d", i, res, err, first.Fence)
		}
		if info, held, err := a.Inspect(ctx, key); err != nil || !held || info.Token != token || info.Fence != res.Fence {
			t.Fatalf("round %d: row %+v, held %v, %v; want %s's, fence %d", i, info, held, err, token, res.Fence)
		}
		if ok, err := b.Release(ctx, key, token); err != nil || !ok {
			t.Fatalf("round %d: Release = %v, %v", i, ok, err)
		}
	}
}
