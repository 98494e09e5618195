package redis

import (
	"context"
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
	// On a busy machine every goroutine may wake late, the driver's as much
	// as this test's: a is due by the bound, and may come after it only
	// within a slack of when this test's own timer for the bound woke.
	start = time.Now()
	bound := time.NewTimer(WaiterLiveness + WaitPollInterval + 50*time.Millisecond)
	defer bound.Stop()
	type result struct {
		res drivers.AcquireResult
		err error
	}
	third := make(chan result, 1)
	go func() {
		res, err := a.Acquire(ctx, req("a3", 2*time.Second))
		third <- result{res, err}
	}()
	var r result
	select {
	case r = <-third:
	case <-bound.C:
		woke := time.Now()
		r = <-third
		if late := time.Since(woke); late > 50*time.Millisecond {
			t.Fatalf("abandoned turn delayed a by %v, %v after this test's timer for the bound woke", time.Since(start), late)
		}
	}
	if r.err != nil || !r.res.Acquired {
		t.Fatalf("a after b gave up: %+v, %v", r.res, r.err)
	}
	a.Release(ctx, key, "a3")
}

// TestCancelledWaiterPassedOver: B queues first, C second; B's context is
// cancelled, and B's driver takes it out of the queue as the call returns
// (in the background: its wait group), so the holder's release hands the
// lock straight to C in the same script, instead of keeping it free for B
// until B's liveness runs out.
func TestCancelledWaiterPassedOver(t *testing.T) {
	ch := "redistest:" + t.Name()
	h, b, c := standalone(t, Options{Channel: ch}), standalone(t, Options{Channel: ch}), standalone(t, Options{Channel: ch})
	ctx := t.Context()
	key := "redistest:" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)
	defer h.Client().Del(context.Background(), lockKey(key), fenceKey(key), queueKey(key), liveKey(key))
	req := func(tok string) drivers.AcquireRequest {
		return drivers.AcquireRequest{Key: key, Token: tok, TTL: 5 * time.Second, Wait: 5 * time.Second}
	}
	if res, err := h.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "h", TTL: 5 * time.Second}); err != nil || !res.Acquired {
		t.Fatalf("h: %+v, %v", res, err)
	}
	bctx, cancelB := context.WithCancel(ctx)
	gotB := make(chan drivers.AcquireResult, 1)
	go func() {
		res, err := b.Acquire(bctx, req("b"))
		if err != nil {
			t.Error(err)
		}
		gotB <- res
	}()
	queued(t, h, key, 1)
	gotC := make(chan drivers.AcquireResult, 1)
	go func() {
		res, err := c.Acquire(ctx, req("c"))
		if err != nil {
			t.Error(err)
		}
		gotC <- res
	}()
	queued(t, h, key, 2)
	waitFor(t, "c subscribed", func() bool { return numSub(t, h, c.channel()) == 1 })

	cancelB()
	if res := <-gotB; res.Acquired {
		t.Fatalf("b: %+v after its ctx ended", res)
	}
	b.wg.Wait() // b's background leave
	if ids := h.Client().ZRange(ctx, queueKey(key), 0, -1).Val(); len(ids) != 1 || ids[0] != c.id {
		t.Fatalf("queue %v after b gave up; want c alone", ids)
	}
	released := time.Now()
	if ok, err := h.Release(ctx, key, "h"); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	// The release script itself handed the lock to c.
	if info, held, err := h.Inspect(ctx, key); err != nil || !held || info.Token != "c" {
		t.Fatalf("after the release: %+v, %v, %v; want handed to c", info, held, err)
	}
	res := <-gotC
	if took := time.Since(released); !res.Acquired || took > WaiterLiveness/4 {
		t.Fatalf("c: %+v %v after the release; want acquired well within %v", res, took, WaiterLiveness)
	}
}

// TestLeaveKeepsALaterAttempt: the waiter id is the driver's, so a leave
// (run in the background) of an ended call must not take out a later
// attempt of the same driver for the same key: it only does so while its
// own token is the one registered. A wait that ran out keeps its place.
func TestLeaveKeepsALaterAttempt(t *testing.T) {
	h, w := standalone(t, Options{}), standalone(t, Options{})
	ctx := t.Context()
	key := "redistest:" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)
	defer h.Client().Del(context.Background(), lockKey(key), fenceKey(key), queueKey(key), liveKey(key))
	if res, err := h.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "h", TTL: 5 * time.Second}); err != nil || !res.Acquired {
		t.Fatalf("h: %+v, %v", res, err)
	}
	req := func(tok string) drivers.AcquireRequest {
		return drivers.AcquireRequest{Key: key, Token: tok, TTL: 5 * time.Second}
	}
	state := func() (queuedAt float64, token string) {
		queuedAt = h.Client().ZScore(ctx, queueKey(key), w.id).Val()
		token = h.Client().HGet(ctx, liveKey(key), "t:"+w.id).Val()
		return queuedAt, token
	}
	for _, tok := range []string{"w1", "w2"} { // the second attempt keeps the first's place
		if res, err := w.acquireOnce(ctx, req(tok), true); err != nil || res.Acquired {
			t.Fatalf("w %s: %+v, %v", tok, res, err)
		}
	}
	at, tok := state()
	if at == 0 || tok != "w2" {
		t.Fatalf("queued at %v with token %q; want queued with w2", at, tok)
	}
	if _, err := w.leave(ctx, req("w1"), true, true); err != nil {
		t.Fatal(err)
	}
	if at2, tok := state(); at2 != at || tok != "w2" {
		t.Fatalf("after w1's leave: queued at %v with token %q; want the w2 attempt kept at %v", at2, tok, at)
	}
	if _, err := w.leave(ctx, req("w2"), false, true); err != nil {
		t.Fatal(err)
	}
	if at2, tok := state(); at2 != at || tok != "" {
		t.Fatalf("after w2's wait ran out: queued at %v with token %q; want its place kept, token gone", at2, tok)
	}
	if res, err := w.acquireOnce(ctx, req("w3"), true); err != nil || res.Acquired {
		t.Fatalf("w w3: %+v, %v", res, err)
	}
	if _, err := w.leave(ctx, req("w3"), true, true); err != nil {
		t.Fatal(err)
	}
	if n := h.Client().ZCard(ctx, queueKey(key)).Val(); n != 0 {
		t.Fatalf("%d waiters queued after w3's call ended; want none", n)
	}
}

// TestGrantBeforeWatch: a waiting call watches only once its first attempt
// did not get the lock. A release that hands it the lock between that
// attempt and its watch is heard first; the call holds the lock once it
// watches, with the fence handed over.
func TestGrantBeforeWatch(t *testing.T) {
	h, w := standalone(t, Options{}), standalone(t, Options{})
	ctx := t.Context()
	key := "redistest:" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)
	defer h.Client().Del(context.Background(), lockKey(key), fenceKey(key), queueKey(key), liveKey(key))
	req := func(tok string, wait time.Duration) drivers.AcquireRequest {
		return drivers.AcquireRequest{Key: key, Token: tok, TTL: 5 * time.Second, Wait: wait}
	}
	if res, err := h.Acquire(ctx, req("h", 0)); err != nil || !res.Acquired {
		t.Fatalf("h: %+v, %v", res, err)
	}
	w.listen()
	waitFor(t, "waiter's subscription confirmed", func() bool {
		w.watchers.mu.Lock()
		defer w.watchers.mu.Unlock()
		return !w.watchers.since.IsZero()
	})
	wreq := req("w", time.Second)
	// its first attempt, started after the confirmation: only the grant
	// wakes it
	start := time.Now()
	if res, err := w.acquireOnce(ctx, wreq, true); err != nil || res.Acquired {
		t.Fatalf("w: %+v, %v", res, err)
	}
	if ok, err := h.Release(ctx, key, "h"); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	if v := h.Client().Get(ctx, lockKey(key)).Val(); v != "w" {
		t.Fatalf("lock held by %q; want it handed to w", v)
	}
	waitFor(t, "hand-off heard", func() bool {
		w.watchers.mu.Lock()
		defer w.watchers.mu.Unlock()
		_, ok := w.watchers.early[attempt{key, "w"}]
		return ok
	})
	wt := w.watch(key, "w", start)
	defer w.unwatch(wreq, wt, true)
	select {
	case <-wt.wake:
	default:
		t.Fatal("watch not woken by the lock handed over before it")
	}
	fence, _ := h.Client().Get(ctx, fenceKey(key)).Uint64()
	if f := w.granted(wt); f == 0 || f != fence {
		t.Fatalf("fence handed %d; want the counter's %d", f, fence)
	}
	w.watchers.mu.Lock()
	left := len(w.watchers.early)
	w.watchers.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d early grants left after the watch took its own", left)
	}
}
