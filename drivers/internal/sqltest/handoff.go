package sqltest

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// PassOn checks a hand-off between two drivers: with key held by a's token
// "a" at fence first, b's waiting Acquire (token "b") gets the lock, fenced
// above first, once a releases it; then b releases it. queued, if not nil,
// runs once b's call has started, before the release (to wait until b is
// queued).
func PassOn(ctx context.Context, t *testing.T, a, b drivers.Driver, key string, first uint64, queued func()) {
	t.Helper()
	waited := make(chan drivers.AcquireResult, 1)
	go func() {
		res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "b", TTL: time.Minute, Wait: 30 * time.Second})
		if err != nil {
			t.Errorf("waiting Acquire: %v", err)
		}
		waited <- res
	}()
	if queued != nil {
		queued()
	}
	if ok, err := a.Release(ctx, key, "a"); err != nil || !ok {
		t.Errorf("Release = %v, %v", ok, err)
	}
	if res := <-waited; !res.Acquired || res.Fence <= first {
		t.Fatalf("waiter got %+v; want the lock, fenced above %d", res, first)
	}
	if ok, err := b.Release(ctx, key, "b"); err != nil || !ok {
		t.Fatalf("Release of the waiter's lock = %v, %v", ok, err)
	}
}
