package redis

import (
	"strconv"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// TestWaitersTakeTurns: a waiter queued in Redis gets a released lock
// before its releasing holder can take it again; a waiter that gave up
// holds its turn at most WaiterLiveness.
func TestWaitersTakeTurns(t *testing.T) {
	a, b := standalone(t, Options{}), standalone(t, Options{})
	ctx := t.Context()
	key := "redistest:" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)
	req := func(tok string, wait time.Duration) drivers.AcquireRequest {
		return drivers.AcquireRequest{Key: key, Token: tok, TTL: 5 * time.Second, Wait: wait}
	}
	if res, err := a.Acquire(ctx, req("a1", 0)); err != nil || !res.Acquired {
		t.Fatalf("a: %+v, %v", res, err)
	}
	got := make(chan drivers.AcquireResult, 1)
	go func() {
		res, err := b.Acquire(ctx, req("b1", 3*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	waitFor(t, "b queued", func() bool { return a.Client().ZCard(ctx, queueKey(key)).Val() == 1 })
	start := time.Now()
	if ok, err := a.Release(ctx, key, "a1"); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	if res, err := a.Acquire(ctx, req("a2", 0)); err != nil || (res.Acquired && len(got) == 0) {
		t.Fatalf("releasing holder overtook the queued waiter: %+v, %v", res, err)
	}
	res := <-got
	if !res.Acquired || time.Since(start) > 50*time.Millisecond {
		t.Fatalf("queued waiter: %+v after %v; want acquired at once", res, time.Since(start))
	}
	// b queues again, then gives up (its Wait ends); once b releases, a waits
	// at most WaiterLiveness for b's abandoned turn.
	if res, err := b.Acquire(ctx, req("b2", 20*time.Millisecond)); err != nil || res.Acquired {
		t.Fatalf("b again: %+v, %v", res, err)
	}
	if ok, err := b.Release(ctx, key, "b1"); err != nil || !ok {
		t.Fatalf("b release: %v, %v", ok, err)
	}
	start = time.Now()
	if res, err := a.Acquire(ctx, req("a3", 2*time.Second)); err != nil || !res.Acquired {
		t.Fatalf("a after b gave up: %+v, %v", res, err)
	}
	if took := time.Since(start); took > WaiterLiveness+WaitPollInterval+50*time.Millisecond {
		t.Fatalf("abandoned turn delayed a by %v", took)
	}
	a.Release(ctx, key, "a3")
}
