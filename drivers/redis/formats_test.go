package redis

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
)

// TestStoredFormats pins what the scripts store and publish, which drivers
// of other versions read on the same server during a rolling upgrade: a
// queued attempt's arrival (server ms, a decimal integer) and its token
// and ttl in the queue hash, its score (its arrival, or one more than the
// last member's), the queue keys' ttl (the waiter liveness), the fence
// counter's ttl after a hand-off and a handover (the longer of the
// counter ttl and the new holder's), and the grant message
// "g<fence>,<token length>,<token><key>".
func TestStoredFormats(t *testing.T) {
	ctx := t.Context()
	h := standalone(t, Options{FenceTTL: 2 * time.Second})
	w, x := standalone(t, Options{}), standalone(t, Options{})
	key := "redistest:" + t.Name()
	lk, fk, qk, lv := lockKey(key), fenceKey(key), queueKey(key), liveKey(key)
	c := h.Client()
	c.Del(ctx, lk, fk, qk, lv)
	defer c.Del(context.Background(), lk, fk, qk, lv)
	sub := c.Subscribe(ctx, w.channel()) // w's subscription, as the hand-off needs
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := h.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "holder", TTL: 10 * time.Second}); err != nil || !res.Acquired {
		t.Fatalf("holder: %+v, %v", res, err)
	}
	ms := func() int64 { return c.Time(ctx).Val().UnixMilli() }
	before := ms()
	if res, err := w.acquireOnce(ctx, drivers.AcquireRequest{Key: key, Token: "next", TTL: 7 * time.Second}, true); err != nil || res.Acquired || res.HolderTTL <= 9*time.Second {
		t.Fatalf("first waiter: %+v, %v", res, err)
	}
	after := ms()
	f := c.HGetAll(ctx, lv).Val()
	at, err := strconv.ParseInt(f[w.id], 10, 64)
	if err != nil || !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(f[w.id]) || at < before || at > after ||
		f["t:"+w.id] != "next" || f["x:"+w.id] != "7000" || len(f) != 3 {
		t.Fatalf("queue hash %v, want the arrival in [%d, %d], token and ttl", f, before, after)
	}
	if s := c.ZScore(ctx, qk, w.id).Val(); s != float64(at) {
		t.Fatalf("score %v, want %d", s, at)
	}
	for _, k := range []string{qk, lv} {
		if d := c.PTTL(ctx, k).Val(); d <= 0 || d > WaiterLiveness {
			t.Fatalf("%s ttl %v", k, d)
		}
	}
	late := float64(after + 1e6) // a member queued after, with a later score
	c.ZAdd(ctx, qk, goredis.Z{Score: late, Member: "late"})
	if res, err := x.acquireOnce(ctx, drivers.AcquireRequest{Key: key, Token: "x", TTL: time.Second}, true); err != nil || res.Acquired {
		t.Fatalf("second waiter: %+v, %v", res, err)
	}
	if s := c.ZScore(ctx, qk, x.id).Val(); s != late+1 {
		t.Fatalf("score %v after the last's %v", s, late)
	}
	c.HSet(ctx, lv, w.id, strconv.FormatInt(after+1e6, 10), x.id, "0") // w live however slow the test, x not
	c.ZRem(ctx, qk, "late")

	pttl := func(k string, lo, hi time.Duration) {
		t.Helper()
		if d := c.PTTL(ctx, k).Val(); d <= lo || d > hi {
			t.Fatalf("%s ttl %v, want in (%v, %v]", k, d, lo, hi)
		}
	}
	if ok, err := h.Release(ctx, key, "holder"); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	msg, err := sub.ReceiveMessage(ctx)
	fence := c.Get(ctx, fk).Val()
	if err != nil || msg.Payload != "g"+fence+",4,next"+key || c.Get(ctx, lk).Val() != "next" {
		t.Fatalf("grant %v, %v; fence %s", msg, err, fence)
	}
	pttl(lk, 6*time.Second, 7*time.Second)
	pttl(fk, 6*time.Second, 7*time.Second) // the waiter's ttl, longer than h's counter ttl

	c.HSet(ctx, lv, x.id, strconv.FormatInt(after+1e6, 10), "t:"+x.id, "x2", "x:"+x.id, "1000")
	xs := x.Client().Subscribe(ctx, x.channel())
	defer xs.Close()
	if _, err := xs.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := h.Release(ctx, key, "next"); err != nil || !ok || c.Get(ctx, lk).Val() != "x2" {
		t.Fatalf("release to x: %v, %v", ok, err)
	}
	pttl(fk, time.Second, 2*time.Second) // h's counter ttl, longer than the waiter's
	for _, tc := range []struct {
		from, to string
		ttl, lo  time.Duration
	}{{"x2", "n3", 5 * time.Second, 4 * time.Second}, {"n3", "n4", time.Second, time.Second}} {
		if ok, res, err := h.Handover(ctx, key, tc.from, drivers.AcquireRequest{Token: tc.to, TTL: tc.ttl}); err != nil || !ok || !res.Acquired {
			t.Fatalf("handover to %s: %v, %+v, %v", tc.to, ok, res, err)
		}
		pttl(fk, tc.lo, max(tc.ttl, 2*time.Second))
	}
}
