package redis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// giveUp is each way a holder gives a lock up with waiters queued: release,
// handover (to a successor in its own process, which must not overtake
// them), and a leave that releases a lock handed to a caller that had
// given up. Each must pass the lock to the first live waiter.
var giveUp = []struct {
	name string
	op   func(t *testing.T, h *Driver, key, token string)
}{
	{"release", func(t *testing.T, h *Driver, key, token string) {
		if ok, err := h.Release(t.Context(), key, token); err != nil || !ok {
			t.Fatalf("release: %v, %v", ok, err)
		}
	}},
	{"handover", func(t *testing.T, h *Driver, key, token string) {
		released, res, err := h.Handover(t.Context(), key, token, drivers.AcquireRequest{Key: key, Token: "successor", TTL: 5 * time.Second})
		if err != nil || !released || res.Acquired {
			t.Fatalf("handover: %v, %+v, %v; want released, not handed to the successor", released, res, err)
		}
	}},
	{"leave", func(t *testing.T, h *Driver, key, token string) {
		res, err := h.leave(t.Context(), drivers.AcquireRequest{Key: key, Token: token, TTL: 5 * time.Second}, true, true)
		if err != nil || res.Acquired {
			t.Fatalf("leave: %+v, %v; want the lock released", res, err)
		}
	}},
}

// queueLive queues w for key with token, subscribed, as a waiting Acquire
// does between its attempts.
func queueLive(t *testing.T, w *Driver, key, token string) {
	t.Helper()
	cancel, err := w.Subscribe(t.Context(), func(drivers.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	waitFor(t, "subscribed", func() bool { return numSub(t, w, w.channel()) == 1 })
	if res, err := w.acquireOnce(t.Context(), drivers.AcquireRequest{Key: key, Token: token, TTL: 5 * time.Second}, true); err != nil || res.Acquired {
		t.Fatalf("waiter %s: %+v, %v", token, res, err)
	}
}

// TestPassSkipsStaleWaiters: the first waiter stopped retrying (its process
// frozen with its connections open); the lock goes to the second, and both
// leave the queue.
func TestPassSkipsStaleWaiters(t *testing.T) {
	for _, tc := range giveUp {
		t.Run(tc.name, func(t *testing.T) {
			ch := "redistest:" + t.Name()
			h, stale, live := standalone(t, Options{Channel: ch}), standalone(t, Options{Channel: ch}), standalone(t, Options{Channel: ch})
			key := "redistest:" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)
			defer h.Client().Del(context.Background(), fenceKey(key), queueKey(key), liveKey(key))
			if res, err := h.Acquire(t.Context(), drivers.AcquireRequest{Key: key, Token: "h", TTL: 5 * time.Second}); err != nil || !res.Acquired {
				t.Fatalf("h: %+v, %v", res, err)
			}
			queueLive(t, stale, key, "stale")
			queueLive(t, live, key, "live")
			if err := h.Client().HSet(t.Context(), liveKey(key), stale.id, 1).Err(); err != nil {
				t.Fatal(err)
			}
			tc.op(t, h, key, "h")
			if info, held, err := h.Inspect(t.Context(), key); err != nil || !held || info.Token != "live" {
				t.Fatalf("after giving up: %+v, %v, %v; want held by the live waiter", info, held, err)
			}
			if n := h.Client().ZCard(t.Context(), queueKey(key)).Val(); n != 0 {
				t.Fatalf("%d waiters left in the queue; want none", n)
			}
		})
	}
}

// TestPassOnAFullServer: a server over maxmemory (noeviction) refuses a
// script's first write when it may grow memory; a holder can still renew
// its lock and give it up, to the first waiter or to a successor, while
// new locks are refused.
func TestPassOnAFullServer(t *testing.T) {
	s := testutil.StartRedis(t)
	known(t, s)
	opts := Options{Addrs: []string{s.Addr}, Channel: "redistest:full"}
	full := func(t *testing.T, d *Driver) {
		t.Helper()
		info := d.Client().Info(t.Context(), "memory").Val()
		_, rest, _ := strings.Cut(info, "used_memory:")
		used, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", strconv.Itoa(used / 2)}} {
			if err := d.Client().ConfigSet(t.Context(), kv[0], kv[1]).Err(); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { d.Client().ConfigSet(context.Background(), "maxmemory", "0") })
		if err := d.Client().Set(t.Context(), "probe", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "OOM") {
			t.Fatalf("SET on the full server: %v; want OOM", err)
		}
	}
	for _, tc := range giveUp {
		t.Run(tc.name+"/to a waiter", func(t *testing.T) {
			h, w := standalone(t, opts), standalone(t, opts)
			key := "full:" + t.Name()
			if res, err := h.Acquire(t.Context(), drivers.AcquireRequest{Key: key, Token: "h", TTL: 5 * time.Second}); err != nil || !res.Acquired {
				t.Fatalf("h: %+v, %v", res, err)
			}
			queueLive(t, w, key, "w")
			full(t, h)
			tc.op(t, h, key, "h")
			if info, held, err := h.Inspect(t.Context(), key); err != nil || !held || info.Token != "w" {
				t.Fatalf("after giving up: %+v, %v, %v; want held by the waiter", info, held, err)
			}
		})
	}
	t.Run("renew and release, nobody queued", func(t *testing.T) {
		h := standalone(t, opts)
		key := "full:" + t.Name()
		if res, err := h.Acquire(t.Context(), drivers.AcquireRequest{Key: key, Token: "h", TTL: 5 * time.Second}); err != nil || !res.Acquired {
			t.Fatalf("h: %+v, %v", res, err)
		}
		full(t, h)
		if ok, err := h.Extend(t.Context(), key, "h", 8*time.Second); err != nil || !ok {
			t.Fatalf("extend: %v, %v", ok, err)
		}
		if r := h.Renew(t.Context(), []drivers.Lease{{Key: key, Token: "h", TTL: 8 * time.Second}}); r[0].Err != nil || !r[0].Held {
			t.Fatalf("renew: %+v", r[0])
		}
		if ok, err := h.Release(t.Context(), key, "h"); err != nil || !ok {
			t.Fatalf("release: %v, %v", ok, err)
		}
		// New locks need memory: refused while the server is full.
		if res, err := h.Acquire(t.Context(), drivers.AcquireRequest{Key: key, Token: "h2", TTL: 5 * time.Second}); err == nil || res.Acquired {
			t.Fatalf("acquire on the full server: %+v, %v; want an error", res, err)
		}
	})
	t.Run("handover/to the successor", func(t *testing.T) {
		h := standalone(t, opts)
		key := "full:" + t.Name()
		first, err := h.Acquire(t.Context(), drivers.AcquireRequest{Key: key, Token: "h", TTL: 5 * time.Second})
		if err != nil || !first.Acquired {
			t.Fatalf("h: %+v, %v", first, err)
		}
		full(t, h)
		released, res, err := h.Handover(t.Context(), key, "h", drivers.AcquireRequest{Key: key, Token: "n", TTL: 5 * time.Second})
		if err != nil || !released || !res.Acquired || res.Fence != first.Fence+1 {
			t.Fatalf("handover: %v, %+v, %v; want handed with fence %d", released, res, err, first.Fence+1)
		}
	})
}
