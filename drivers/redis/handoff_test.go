package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
)

// messages records every release message published on a channel prefix.
type messages struct {
	ps *goredis.PubSub
	ch <-chan *goredis.Message
}

func listen(t *testing.T, c goredis.UniversalClient, prefix string) *messages {
	t.Helper()
	ps := c.PSubscribe(t.Context(), prefix+":*")
	if _, err := ps.Receive(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.Close() })
	return &messages{ps: ps, ch: ps.Channel()}
}

// next returns the messages published before a marker this call
// publishes itself: all of them, with no sleep.
func (m *messages) next(t *testing.T, c goredis.UniversalClient, prefix string) []*goredis.Message {
	t.Helper()
	marker := prefix + ":marker"
	if err := c.Publish(t.Context(), marker, "end").Err(); err != nil {
		t.Fatal(err)
	}
	var out []*goredis.Message
	timeout := time.After(5 * time.Second)
	for {
		select {
		case msg := <-m.ch:
			if msg.Channel == marker {
				return out
			}
			out = append(out, msg)
		case <-timeout:
			t.Fatal("marker message never arrived")
		}
	}
}

// queued waits until key's queue holds n waiters.
func queued(t *testing.T, d *Driver, key string, n int64) {
	t.Helper()
	waitFor(t, "waiters queued", func() bool { return d.Client().ZCard(t.Context(), queueKey(key)).Val() == n })
}

// TestReleasePassesTheLock: an uncontended release publishes nothing; a
// release with waiters queued sets the lock for the first of them and tells
// only that one's driver, whose Acquire returns with the fence (no round
// trip of its own); the next release passes it to the next waiter.
func TestReleasePassesTheLock(t *testing.T) {
	ch := "redistest:" + t.Name()
	h, b, c := standalone(t, Options{Channel: ch}), standalone(t, Options{Channel: ch}), standalone(t, Options{Channel: ch})
	ctx := t.Context()
	msgs := listen(t, h.Client(), ch)
	key := "redistest:" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)
	defer h.Client().Del(context.Background(), fenceKey(key))
	req := func(tok string, wait time.Duration) drivers.AcquireRequest {
		return drivers.AcquireRequest{Key: key, Token: tok, TTL: 5 * time.Second, Wait: wait}
	}

	if res, err := h.Acquire(ctx, req("h1", 0)); err != nil || !res.Acquired {
		t.Fatalf("h: %+v, %v", res, err)
	}
	if ok, err := h.Release(ctx, key, "h1"); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	if got := msgs.next(t, h.Client(), ch); len(got) != 0 {
		t.Fatalf("uncontended release published %d messages", len(got))
	}

	if res, err := h.Acquire(ctx, req("h2", 0)); err != nil || !res.Acquired {
		t.Fatalf("h: %+v, %v", res, err)
	}
	gotB := drivertest.AcquireAsync(ctx, b, req("b", 5*time.Second))
	queued(t, b, key, 1)
	gotC := drivertest.AcquireAsync(ctx, c, req("c", 5*time.Second))
	queued(t, c, key, 2)
	waitFor(t, "b and c subscribed", func() bool {
		return numSub(t, h, b.channel()) == 1 && numSub(t, h, c.channel()) == 1
	})

	if ok, err := h.Release(ctx, key, "h2"); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	rb := <-gotB
	if rb.Err != nil || !rb.Res.Acquired {
		t.Fatalf("b: %+v, %v", rb.Res, rb.Err)
	}
	info, ok, err := h.Inspect(ctx, key)
	if err != nil || !ok || info.Token != "b" || info.Fence != rb.Res.Fence || info.TTL < 4*time.Second {
		t.Fatalf("after the release: %+v, %v, %v; want held by b with fence %d", info, ok, err, rb.Res.Fence)
	}
	got := msgs.next(t, h.Client(), ch)
	if len(got) != 1 || got[0].Channel != b.channel() || !strings.HasPrefix(got[0].Payload, "g") {
		t.Fatalf("messages %v; want one hand-off to b", got)
	}
	select {
	case rc := <-gotC:
		t.Fatalf("c got %+v, %v while b holds the lock", rc.Res, rc.Err)
	default:
	}

	if ok, err := b.Release(ctx, key, "b"); err != nil || !ok {
		t.Fatalf("b release: %v, %v", ok, err)
	}
	rc := <-gotC
	if rc.Err != nil || !rc.Res.Acquired || rc.Res.Fence != rb.Res.Fence+1 {
		t.Fatalf("c: %+v, %v; want the fence after %d", rc.Res, rc.Err, rb.Res.Fence)
	}
	if got := msgs.next(t, h.Client(), ch); len(got) != 1 || got[0].Channel != c.channel() {
		t.Fatalf("messages %v; want one to c", got)
	}
	if ok, err := c.Release(ctx, key, "c"); err != nil || !ok {
		t.Fatalf("c release: %v, %v", ok, err)
	}
	if n := h.Client().Exists(ctx, queueKey(key), liveKey(key)).Val(); n != 0 {
		t.Fatalf("%d queue keys left", n)
	}
}

// TestNoHandOffToGoneWaiters: a release hands the lock only to a waiter
// still waiting. One whose wait ended (time up, ctx cancelled) unregistered
// its token, and one whose process is gone has no subscription: the lock
// is then left free (the waiter still being first, it is told to retry).
func TestNoHandOffToGoneWaiters(t *testing.T) {
	for _, tc := range []struct {
		name string
		gone func(t *testing.T, w *Driver, key string)
	}{
		{"time up", func(t *testing.T, w *Driver, key string) {
			res, err := w.Acquire(t.Context(), drivers.AcquireRequest{Key: key, Token: "w", TTL: 5 * time.Second, Wait: 30 * time.Millisecond})
			if err != nil || res.Acquired {
				t.Fatalf("waiter: %+v, %v", res, err)
			}
		}},
		{"ctx cancelled", func(t *testing.T, w *Driver, key string) {
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() {
				defer close(done)
				// (an error when the cancel cuts an attempt: the
				// subscription's confirmation has the waiter look again)
				res, err := w.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "w", TTL: 5 * time.Second, Wait: 5 * time.Second})
				if (err != nil && !errors.Is(err, context.Canceled)) || res.Acquired {
					t.Errorf("waiter: %+v, %v", res, err)
				}
			}()
			queued(t, w, key, 1)
			cancel()
			<-done
			w.wg.Wait() // the background leave
			// Out of the queue by the leave, not by the queue's expiry.
			f := w.Client().HMGet(t.Context(), liveKey(key), w.id, "t:"+w.id, "x:"+w.id).Val()
			if f[0] != nil || f[1] != nil || f[2] != nil || w.Client().ZScore(t.Context(), queueKey(key), w.id).Err() != goredis.Nil {
				t.Fatalf("queue hash fields %v; want the waiter gone from the queue", f)
			}
		}},
		{"process gone", func(t *testing.T, w *Driver, key string) {
			cancel, err := w.Subscribe(t.Context(), func(drivers.Event) {})
			if err != nil {
				t.Fatal(err)
			}
			defer cancel()
			waitFor(t, "subscribed", func() bool { return numSub(t, w, w.channel()) == 1 })
			// Queued with its token, then its connections close, as when
			// the process is killed.
			if res, err := w.acquireOnce(t.Context(), drivers.AcquireRequest{Key: key, Token: "w", TTL: 5 * time.Second}, true); err != nil || res.Acquired {
				t.Fatalf("waiter: %+v, %v", res, err)
			}
			w.Close(t.Context())
		}},
		{"stopped retrying", func(t *testing.T, w *Driver, key string) {
			queueLive(t, w, key, "w")
			// Its last attempt long past WaiterLiveness, as for a process
			// frozen with its connections open.
			if err := w.Client().HSet(t.Context(), liveKey(key), w.id, 1).Err(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := "redistest:" + t.Name()
			h, w := standalone(t, Options{Channel: ch}), standalone(t, Options{Channel: ch})
			ctx := t.Context()
			key := "redistest:" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)
			defer h.Client().Del(context.Background(), fenceKey(key), queueKey(key), liveKey(key))
			if res, err := h.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "h", TTL: 5 * time.Second}); err != nil || !res.Acquired {
				t.Fatalf("h: %+v, %v", res, err)
			}
			tc.gone(t, w, key)
			if ok, err := h.Release(ctx, key, "h"); err != nil || !ok {
				t.Fatalf("release: %v, %v", ok, err)
			}
			if _, held, err := h.Inspect(ctx, key); err != nil || held {
				t.Fatalf("lock held (%v, %v) after the release: handed to a gone waiter", held, err)
			}
		})
	}
}

// TestLeaveClaimsOrPassesAHandOff: a lock handed over just as its waiter's
// time is up is the waiter's (leave returns it), or, when the waiter no
// longer wants it, released at once and passed on to the next waiter.
func TestLeaveClaimsOrPassesAHandOff(t *testing.T) {
	for _, release := range []bool{false, true} {
		t.Run("release="+strconv.FormatBool(release), func(t *testing.T) {
			ch := "redistest:" + t.Name()
			h, w, next := standalone(t, Options{Channel: ch}), standalone(t, Options{Channel: ch}), standalone(t, Options{Channel: ch})
			ctx := t.Context()
			key := "redistest:" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)
			defer h.Client().Del(context.Background(), lockKey(key), fenceKey(key), queueKey(key), liveKey(key))
			req := drivers.AcquireRequest{Key: key, Token: "w", TTL: 5 * time.Second}
			if res, err := h.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "h", TTL: 5 * time.Second}); err != nil || !res.Acquired {
				t.Fatalf("h: %+v, %v", res, err)
			}
			cancel, err := w.Subscribe(ctx, func(drivers.Event) {})
			if err != nil {
				t.Fatal(err)
			}
			defer cancel()
			waitFor(t, "subscribed", func() bool { return numSub(t, w, w.channel()) == 1 })
			// w queued, then next; the release hands the lock to w while
			// no call of w is listening.
			if res, err := w.acquireOnce(ctx, req, true); err != nil || res.Acquired {
				t.Fatalf("w: %+v, %v", res, err)
			}
			if res, err := next.acquireOnce(ctx, drivers.AcquireRequest{Key: key, Token: "n", TTL: 5 * time.Second}, true); err != nil || res.Acquired {
				t.Fatalf("next: %+v, %v", res, err)
			}
			if ok, err := h.Release(ctx, key, "h"); err != nil || !ok {
				t.Fatalf("release: %v, %v", ok, err)
			}
			info, _, _ := h.Inspect(ctx, key)
			if info.Token != "w" {
				t.Fatalf("holder %q after the release; want w", info.Token)
			}
			res, err := w.leave(ctx, req, release, true)
			if err != nil {
				t.Fatal(err)
			}
			if !release {
				if !res.Acquired || res.Fence != info.Fence {
					t.Fatalf("leave = %+v; want acquired with fence %d", res, info.Fence)
				}
				return
			}
			if res.Acquired {
				t.Fatalf("leave = %+v; want released", res)
			}
			// next is not subscribed: the lock is left free for it.
			if res, err := next.acquireOnce(ctx, drivers.AcquireRequest{Key: key, Token: "n", TTL: 5 * time.Second}, true); err != nil || !res.Acquired {
				t.Fatalf("next after the pass: %+v, %v", res, err)
			}
		})
	}
}

func TestParseMessage(t *testing.T) {
	for _, tc := range []struct {
		in         string
		key, token string
		fence      uint64
		ok         bool
	}{
		{"wk", "k", "", 0, true},
		{"w", "", "", 0, true},
		{"g12,3,tokkey,with,commas", "key,with,commas", "tok", 12, true},
		{"g12,0,", "", "", 12, true},
		{"g1795979180043180,2,abé", "é", "ab", 1795979180043180, true},
		{"", "", "", 0, false},
		{"x", "", "", 0, false},
		{"g12,9,tok", "", "", 0, false},
		{"g0,1,tk", "", "", 0, false},
		{"g1,-1,tk", "", "", 0, false},
		{"gx,1,tk", "", "", 0, false},
		{"g1", "", "", 0, false},
	} {
		key, token, fence, ok := parseMessage(tc.in)
		if key != tc.key || token != tc.token || fence != tc.fence || ok != tc.ok {
			t.Errorf("parseMessage(%q) = %q, %q, %d, %v; want %q, %q, %d, %v", tc.in, key, token, fence, ok, tc.key, tc.token, tc.fence, tc.ok)
		}
	}
}

// TestHandoverQueued: a handover with a waiter queued in the store releases
// the lock and passes it to that waiter, as a release does; with nobody
// queued it passes the lock to the new token, with the next fence.
func TestHandoverQueued(t *testing.T) {
	ch := "redistest:" + t.Name()
	h, b := standalone(t, Options{Channel: ch}), standalone(t, Options{Channel: ch})
	ctx := t.Context()
	key := "redistest:" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)
	defer h.Client().Del(context.Background(), fenceKey(key))
	req := func(tok string, wait time.Duration) drivers.AcquireRequest {
		return drivers.AcquireRequest{Key: key, Token: tok, TTL: 5 * time.Second, Wait: wait}
	}
	first, err := h.Acquire(ctx, req("h1", 0))
	if err != nil || !first.Acquired {
		t.Fatalf("h: %+v, %v", first, err)
	}
	released, res, err := h.Handover(ctx, key, "h1", req("h2", 0))
	if err != nil || !released || !res.Acquired || res.Fence != first.Fence+1 {
		t.Fatalf("Handover, nobody queued = %v, %+v, %v; want handed with fence %d", released, res, err, first.Fence+1)
	}
	gotB := drivertest.AcquireAsync(ctx, b, req("b", 5*time.Second))
	queued(t, b, key, 1)
	waitFor(t, "b subscribed", func() bool { return numSub(t, h, b.channel()) == 1 })
	released, res, err = h.Handover(ctx, key, "h2", req("h3", 0))
	if err != nil || !released || res.Acquired {
		t.Fatalf("Handover with b queued = %v, %+v, %v; want released, not handed", released, res, err)
	}
	if rb := <-gotB; rb.Err != nil || !rb.Res.Acquired {
		t.Fatalf("b: %+v, %v; want the lock passed on", rb.Res, rb.Err)
	}
	if info, ok, err := h.Inspect(ctx, key); err != nil || !ok || info.Token != "b" {
		t.Fatalf("after the handover: %+v, %v, %v; want held by b", info, ok, err)
	}
}
