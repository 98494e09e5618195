package redis

import (
	"context"
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// retrying are drivers whose go-redis client retries a command after a
// network error: with MaxRetries, or an application's client keeping
// go-redis's default 3 retries.
var retrying = []struct {
	name string
	new  func(t *testing.T, addr string) *Driver
}{
	{"maxRetries", func(t *testing.T, addr string) *Driver {
		return standalone(t, Options{Addrs: []string{addr}, MaxRetries: 2})
	}},
	{"client default retries", func(t *testing.T, addr string) *Driver {
		c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		d, err := NewWithClient(c, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close(context.Background()) })
		return d
	}},
}

// retried starts, for a test of go-redis retrying after a lost reply, a
// proxy that can lose replies, the retrying driver of new through it, and
// a direct driver on the server with the scripts loaded (so that the
// first run of a script is not a NOSCRIPT); it returns them and a fresh
// key, whose lock, counter and queue are deleted when the test ends.
func retried(t *testing.T, new func(t *testing.T, addr string) *Driver) (p *loser, d, direct *Driver, key string) {
	t.Helper()
	p = newLoser(t, testutil.RedisAddr())
	d = new(t, p.addr)
	direct = standalone(t, Options{})
	loadScripts(t, direct.Client())
	key = "redistest:" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)
	t.Cleanup(func() {
		direct.Client().Del(context.Background(), lockKey(key), fenceKey(key), queueKey(key), liveKey(key))
	})
	return p, d, direct, key
}

// TestRetriedHandoverKeepsTheLock: a handover whose first run passed the
// lock to the new token but whose reply was lost is retried by go-redis;
// the retry finds the lock held by the new token and reports it handed
// with its fence (not "not held": nobody would track the lock then, and it
// would stay taken for a whole ttl).
func TestRetriedHandoverKeepsTheLock(t *testing.T) {
	for _, tc := range retrying {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			p, d, direct, key := retried(t, tc.new)
			first, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "old", TTL: 5 * time.Second})
			if err != nil || !first.Acquired {
				t.Fatalf("Acquire = %+v, %v", first, err)
			}
			next := "n-" + rand.Text()
			p.lose(next, loseReply)
			released, res, err := d.Handover(ctx, key, "old", drivers.AcquireRequest{Key: key, Token: next, TTL: 5 * time.Second})
			if !p.spent() {
				t.Fatal("no reply lost")
			}
			info, held, ierr := direct.Inspect(ctx, key)
			if ierr != nil || !held || info.Token != next || info.Fence != first.Fence+1 {
				t.Fatalf("holder %+v, %v, %v; want the new token with fence %d", info, held, ierr, first.Fence+1)
			}
			if err != nil || !released || !res.Acquired || res.Fence != info.Fence {
				t.Fatalf("retried Handover = %v, %+v, %v; want handed with fence %d", released, res, err, info.Fence)
			}
		})
	}
}

// TestRetriedLeave: a waiter's leave whose first run ran but whose reply
// was lost, retried by go-redis, ends as the first run did: a lock handed
// to the waiter is returned with its fence (the first run left it as it
// was), or, released by the first run and passed on, is not claimed back.
func TestRetriedLeave(t *testing.T) {
	for _, tc := range retrying {
		for _, release := range []bool{false, true} {
			t.Run(tc.name+"/release="+strconv.FormatBool(release), func(t *testing.T) {
				ctx := t.Context()
				p, w, h, key := retried(t, tc.new)
				if res, err := h.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "h", TTL: 5 * time.Second}); err != nil || !res.Acquired {
					t.Fatalf("h: %+v, %v", res, err)
				}
				cancel, err := w.Subscribe(ctx, func(drivers.Event) {})
				if err != nil {
					t.Fatal(err)
				}
				defer cancel()
				waitFor(t, "w subscribed", func() bool { return numSub(t, h, w.channel()) == 1 })
				req := drivers.AcquireRequest{Key: key, Token: "w-" + rand.Text(), TTL: 5 * time.Second}
				if res, err := w.acquireOnce(ctx, req, true); err != nil || res.Acquired {
					t.Fatalf("w: %+v, %v", res, err)
				}
				if ok, err := h.Release(ctx, key, "h"); err != nil || !ok {
					t.Fatalf("release: %v, %v", ok, err)
				}
				handed, _, _ := h.Inspect(ctx, key)
				if handed.Token != req.Token {
					t.Fatalf("holder %q after the release; want w's token", handed.Token)
				}
				p.lose(req.Token, loseReply)
				res, err := w.leave(ctx, req, release, true)
				if !p.spent() {
					t.Fatal("no reply lost")
				}
				info, held, ierr := h.Inspect(ctx, key)
				if ierr != nil {
					t.Fatal(ierr)
				}
				if !release {
					if err != nil || !res.Acquired || res.Fence != handed.Fence || !held || info.Token != req.Token {
						t.Fatalf("retried leave = %+v, %v, holder %+v; want w's lock with fence %d", res, err, info, handed.Fence)
					}
					return
				}
				if err != nil || res.Acquired || (held && info.Token == req.Token) {
					t.Fatalf("retried leave = %+v, %v, holder %+v (%v); want released, not w's", res, err, info, held)
				}
			})
		}
	}
}
