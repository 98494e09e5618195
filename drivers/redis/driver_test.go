package redis

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// roundTrips counts the commands and pipelines a client sends.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (r *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error { r.n.Add(1); return next(ctx, cmd) }
}
func (r *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error { r.n.Add(1); return next(ctx, cmds) }
}

// TestFenceSeededFromServerTime: a name's first fence is the server's clock
// in microseconds, plus one; then it counts up.
func TestFenceSeededFromServerTime(t *testing.T) {
	d := standalone(t, Options{})
	ctx := t.Context()
	key := "redistest:" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)
	before := uint64(time.Now().Add(-time.Minute).UnixMicro())
	var last uint64
	for i := range 3 {
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "t", TTL: time.Second})
		if err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		if i == 0 && (res.Fence < before || res.Fence > before+uint64(2*time.Minute/time.Microsecond)) {
			t.Fatalf("first fence %d is not the server time in µs (≈%d)", res.Fence, before+60e6)
		}
		if i > 0 && res.Fence != last+1 {
			t.Fatalf("fence %d after %d", res.Fence, last)
		}
		last = res.Fence
		info, ok, err := d.Inspect(ctx, key)
		if err != nil || !ok || info.Fence != res.Fence || info.Token != "t" || info.TTL <= 0 || info.TTL > time.Second {
			t.Fatalf("Inspect = %+v, %v, %v", info, ok, err)
		}
		if ok, err := d.Release(ctx, key, "t"); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
	}
	ttl, err := d.Client().PTTL(ctx, fenceKey(key)).Result()
	if err != nil || ttl <= 0 || ttl > DefaultFenceTTL {
		t.Fatalf("fence counter ttl = %v, %v; want in (0, %v]", ttl, err, DefaultFenceTTL)
	}
}

// TestOneSubscription: however many subscribers, a driver holds one
// Pub/Sub connection, on its own channel; every subscriber hears the
// releases passed to its waiters; the last cancel closes it.
func TestOneSubscription(t *testing.T) {
	ch := "redistest:" + t.Name()
	d := standalone(t, Options{Channel: ch})
	other := standalone(t, Options{Channel: ch})
	ctx := t.Context()
	var mu sync.Mutex
	heard := map[int][]string{}
	var cancels []func()
	for i := range 3 {
		cancel, err := d.Subscribe(ctx, func(e drivers.Event) {
			if e.Kind != drivers.Released {
				t.Errorf("event %v", e.Kind)
			}
			mu.Lock()
			heard[i] = append(heard[i], e.Key)
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		cancels = append(cancels, cancel)
	}
	waitFor(t, "one subscriber on the channel", func() bool { return numSub(t, d, d.channel()) == 1 })
	key := "redistest:{weird}name\x00?" + strconv.FormatInt(time.Now().UnixNano(), 10)
	if res, err := other.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "t", TTL: 5 * time.Second}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	got := make(chan drivers.AcquireResult, 1)
	go func() {
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "w", TTL: 5 * time.Second, Wait: 5 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	waitFor(t, "the waiter queued", func() bool { return d.Client().ZCard(ctx, queueKey(key)).Val() == 1 })
	if ok, err := other.Release(ctx, key, "t"); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	if res := <-got; !res.Acquired {
		t.Fatalf("waiter: %+v", res)
	}
	waitFor(t, "every subscriber hears the release", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range 3 {
			if len(heard[i]) != 1 || heard[i][0] != key {
				return false
			}
		}
		return true
	})
	d.Release(ctx, key, "w")
	d.Client().Del(ctx, fenceKey(key))
	if numSub(t, d, d.channel()) != 1 {
		t.Fatalf("%d subscriptions; want 1", numSub(t, d, d.channel()))
	}
	for _, c := range cancels {
		c()
		c() // idempotent
	}
	// The driver's own listener (started by the waiting Acquire) keeps the
	// subscription until Close.
	d.Close(ctx)
	waitFor(t, "the subscription closes with Close", func() bool { return numSub(t, other, d.channel()) == 0 })
	// Without waits, the last cancel closes it.
	cancel, err := other.Subscribe(ctx, func(drivers.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "other subscribed", func() bool { return numSub(t, other, other.channel()) == 1 })
	cancel()
	waitFor(t, "the subscription closes with the last cancel", func() bool { return numSub(t, other, other.channel()) == 0 })
}

func numSub(t testing.TB, d *Driver, ch string) int64 {
	m, err := d.Client().PubSubNumSub(t.Context(), ch).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m[ch]
}

// TestRenewRoundTrips: a standalone driver renews 2,500 leases in one
// round trip (three script calls of at most 1,000 keys in one pipeline),
// and reports the missing or stolen ones as not held.
func TestRenewRoundTrips(t *testing.T) {
	d := standalone(t, Options{})
	rt := &roundTrips{}
	d.Client().AddHook(rt)
	ctx := t.Context()
	prefix := "redistest:" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10) + ":"
	var leases []drivers.Lease
	for i := range 2500 {
		l := drivers.Lease{Key: prefix + strconv.Itoa(i), Token: "t" + strconv.Itoa(i), TTL: 5 * time.Second}
		leases = append(leases, l)
		if i%100 == 99 {
			continue // never acquired: not held
		}
		if i%100 == 98 {
			l.Token = "someone else"
		}
		// 30 s: the 2,500 acquisitions take over a second on a loaded
		// machine, and the renewal below sets 5 s
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: l.Key, Token: l.Token, TTL: 30 * time.Second}); err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
	}
	defer func() {
		for _, l := range leases {
			d.Client().Del(context.Background(), lockKey(l.Key), fenceKey(l.Key))
		}
	}()
	d.Renew(ctx, leases[:1]) // loads the script if the server lacks it
	rt.n.Store(0)
	res := d.Renew(ctx, leases)
	if n := rt.n.Load(); n != 1 {
		t.Fatalf("%d round trips for 2,500 leases; want 1", n)
	}
	for i, r := range res {
		want := i%100 < 98
		if r.Err != nil || r.Held != want {
			t.Fatalf("lease %d: %+v; want held %v", i, r, want)
		}
	}
	if ttl := d.Client().PTTL(ctx, lockKey(leases[0].Key)).Val(); ttl < 4*time.Second || ttl > 5*time.Second {
		t.Fatalf("renewed lock's ttl %v; want about 5s (acquired for 30s)", ttl)
	}
	// A server that lost its scripts (SCRIPT FLUSH, a restart): EVAL fallback.
	if err := d.Client().ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rt.n.Store(0)
	res = d.Renew(ctx, leases[:10])
	if n := rt.n.Load(); n != 2 || res[0].Err != nil || !res[0].Held {
		t.Fatalf("after SCRIPT FLUSH: %d round trips, %+v; want 2, held", n, res[0])
	}
}

// TestNamesAsData: names that look like hash tags, patterns or Lua are
// plain data.
func TestNamesAsData(t *testing.T) {
	d := standalone(t, Options{})
	ctx := t.Context()
	names := []string{"{", "}", "}{", "{a}", "%7D", "*", "?", "[a-z]", "'..redis.call('FLUSHALL')..'", "ü🔒", strings.Repeat("é}", 5000)}
	for _, n := range names {
		key := "redistest:" + t.Name() + ":" + n
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Second})
		if err != nil || !res.Acquired {
			t.Fatalf("Acquire(%.20q) = %+v, %v", n, res, err)
		}
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "b", TTL: time.Second}); err != nil || res.Acquired {
			t.Fatalf("second Acquire(%.20q) = %+v, %v", n, res, err)
		}
		if ok, err := d.Release(ctx, key, "a"); err != nil || !ok {
			t.Fatalf("Release(%.20q) = %v, %v", n, ok, err)
		}
		d.Client().Del(ctx, fenceKey(key))
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	eventually(t, 5*time.Second, what, cond)
}

// eventually polls cond until it holds, failing the test after limit (a
// restarted cluster master, say, takes seconds to serve its slots again;
// testutil.Poll).
func eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.Poll(t, limit, what, cond)
}
