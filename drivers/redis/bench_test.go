package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
)

// BenchmarkRoundTrip compares one uncontended acquire+release, through the
// driver and through the component, with a PING on the same server (run
// with -count and compare the ns/op ratios; bench/redis has the side-by-side
// comparison with other libraries).
func BenchmarkRoundTrip(b *testing.B) {
	ctx := context.Background()
	d := standalone(b, Options{})
	key := "redisbench:" + strconv.FormatInt(time.Now().UnixNano(), 10)
	b.Run("Ping", func(b *testing.B) {
		for b.Loop() {
			if err := d.Client().Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The component's token is ~64 bytes (holder identity) and its wait
	// positive: the driver with each, to tell them from the component's
	// own share.
	long := strings.Repeat("t", 64)
	for _, v := range []struct {
		name  string
		wait  time.Duration
		token string
		ctx   bool // the component's kind of context: cancelable, with a deadline
	}{{"wait=0", 0, "tok", false}, {"wait=0+tok64", 0, long, false}, {"wait=0+tok64+ctx", 0, long, true},
		{"wait=1s", time.Second, "tok", false}, {"wait=1s+tok64", time.Second, long, false}, {"wait=1s+tok64+ctx", time.Second, long, true}} {
		b.Run("Driver/"+v.name, func(b *testing.B) {
			for b.Loop() {
				ctx, cancel := ctx, context.CancelCauseFunc(func(error) {})
				if v.ctx {
					c, cc := context.WithCancelCause(ctx)
					ctx, cancel = limitCtx{c, time.Now().Add(31 * time.Second)}, cc
				}
				res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: v.token, TTL: 10 * time.Second, Wait: v.wait})
				if err != nil || !res.Acquired {
					b.Fatalf("%+v %v", res, err)
				}
				if ok, err := d.Release(ctx, key, v.token); !ok || err != nil {
					b.Fatalf("%v %v", ok, err)
				}
				cancel(nil)
			}
		})
	}
	m, err := component.New(component.Options{Driver: standalone(b, Options{}), Prefix: "redisbench:", Timeout: component.Forever})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(ctx)
	for _, try := range []bool{true, false} {
		name := "Component/Acquire"
		if try {
			name = "Component/TryAcquire"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				var l *component.Lock
				var err error
				if try {
					l, err = m.TryAcquire(ctx, key)
				} else {
					l, err = m.Acquire(ctx, key)
				}
				if err != nil || l == nil {
					b.Fatalf("%v %v", l, err)
				}
				if ok, err := l.Release(ctx); !ok || err != nil {
					b.Fatalf("%v %v", ok, err)
				}
			}
		})
	}
}

// BenchmarkScripts measures the scripts on the server: an uncontended
// acquire and release, a release that hands the lock to a queued,
// subscribed waiter, and an acquire that finds the lock taken and queues
// behind another waiter. Besides ns/op (which includes a round trip per op
// that sets the state up again), it reports server-µs/op: the server's own
// time in the script, by INFO commandstats (EVALSHA), the figure that the
// hand-offs of a contended lock wait for and that bounds the acquisitions a
// single-threaded server serves per second.
func BenchmarkScripts(b *testing.B) {
	ctx := context.Background()
	d, w := standalone(b, Options{}), standalone(b, Options{})
	cancel, err := w.Subscribe(ctx, func(drivers.Event) {})
	if err != nil {
		b.Fatal(err)
	}
	defer cancel()
	waitFor(b, "waiter subscribed", func() bool { return numSub(b, d, w.channel()) == 1 })
	key := "redisbench:scripts:" + strconv.FormatInt(time.Now().UnixNano(), 10)
	keys := []string{lockKey(key), fenceKey(key), queueKey(key), liveKey(key)}
	defer d.Client().Del(ctx, keys...)
	far := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10) // always live
	b.Run("Acquire/free", func(b *testing.B) {
		serverTime(b, d, 1, func() { d.Client().Del(ctx, keys[0]) }, func() {
			res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "free", TTL: 10 * time.Second})
			if err != nil || !res.Acquired {
				b.Fatalf("%+v %v", res, err)
			}
		})
	})
	b.Run("Release/free", func(b *testing.B) {
		serverTime(b, d, 1, func() { d.Client().Set(ctx, keys[0], "free", 0) }, func() {
			if ok, err := d.Release(ctx, key, "free"); !ok || err != nil {
				b.Fatalf("%v %v", ok, err)
			}
		})
	})
	b.Run("Release/handoff", func(b *testing.B) {
		serverTime(b, d, 1, func() {
			d.Client().Pipelined(ctx, func(p goredis.Pipeliner) error {
				p.Set(ctx, keys[0], "holder", 0)
				p.ZAdd(ctx, keys[2], goredis.Z{Score: 1, Member: w.id})
				p.HSet(ctx, keys[3], w.id, far, "t:"+w.id, "next", "x:"+w.id, "10000")
				return nil
			})
		}, func() {
			if ok, err := d.Release(ctx, key, "holder"); !ok || err != nil {
				b.Fatalf("%v %v", ok, err)
			}
		})
		if v := d.Client().Get(ctx, keys[0]).Val(); v != "next" {
			b.Fatalf("lock held by %q, want it handed to the waiter", v)
		}
	})
	b.Run("Acquire/queue", func(b *testing.B) {
		serverTime(b, d, 1, func() {
			d.Client().Pipelined(ctx, func(p goredis.Pipeliner) error {
				p.ZRem(ctx, keys[2], d.id)
				p.ZAdd(ctx, keys[2], goredis.Z{Score: 1, Member: w.id})
				p.HSet(ctx, keys[3], w.id, far)
				return nil
			})
		}, func() {
			res, err := d.acquireOnce(ctx, drivers.AcquireRequest{Key: key, Token: "late", TTL: 10 * time.Second}, true)
			if err != nil || res.Acquired {
				b.Fatalf("%+v %v", res, err)
			}
		})
	})
}

// serverTime runs setup and op in b's loop and reports the server's time
// in EVALSHA per op (only op runs scripts, the given number of them).
func serverTime(b *testing.B, d *Driver, scripts int, setup, op func()) {
	before := evalshaStats(b, d)
	n := 0
	for b.Loop() {
		setup()
		op()
		n++
	}
	after := evalshaStats(b, d)
	if calls := after[0] - before[0]; calls != float64(n*scripts) {
		b.Fatalf("%v EVALSHA calls for %d ops: another client ran scripts", calls, n)
	}
	b.ReportMetric((after[1]-before[1])/float64(n), "server-µs/op")
}

// evalshaStats returns the server's EVALSHA calls and µs so far.
func evalshaStats(b *testing.B, d *Driver) [2]float64 {
	info, err := d.Client().Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
			var calls, usec float64
			if _, err := fmt.Sscanf(rest, "calls=%g,usec=%g", &calls, &usec); err != nil {
				b.Fatal(err)
			}
			return [2]float64{calls, usec}
		}
	}
	return [2]float64{}
}

// BenchmarkReleasedName measures what a name acquired and released once
// leaves in Redis, by name length: the keys left (its fence counter, kept
// for max(fenceTTL, ttl)) and their memory (MEMORY USAGE, which counts the
// key's name, value and per-key overhead).
func BenchmarkReleasedName(b *testing.B) {
	ctx := context.Background()
	d := standalone(b, Options{})
	for _, n := range []int{64, 1024, 100 * 1024} {
		b.Run("len="+strconv.Itoa(n), func(b *testing.B) {
			base := "redisbench:released:" + strconv.FormatInt(time.Now().UnixNano(), 10) + ":"
			base += strings.Repeat("x", max(0, n-len(base)-8))
			var keys, bytes int64
			i := 0
			for b.Loop() {
				key := fmt.Sprintf("%s%08d", base, i)
				i++
				res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "t", TTL: 10 * time.Second})
				if err != nil || !res.Acquired {
					b.Fatalf("%+v %v", res, err)
				}
				if ok, err := d.Release(ctx, key, "t"); !ok || err != nil {
					b.Fatalf("%v %v", ok, err)
				}
				left := []string{lockKey(key), fenceKey(key), queueKey(key), liveKey(key)}
				keys, bytes = 0, 0
				for _, k := range left {
					if m, err := d.Client().MemoryUsage(ctx, k, 0).Result(); err == nil {
						keys++
						bytes += m
					}
				}
				d.Client().Del(ctx, left...)
			}
			b.ReportMetric(float64(keys), "keys/name")
			b.ReportMetric(float64(bytes), "bytes/name")
		})
	}
}

// limitCtx is a context with a deadline and no timer of its own, as the
// component's attempt context.
type limitCtx struct {
	context.Context
	limit time.Time
}

func (c limitCtx) Deadline() (time.Time, bool) { return c.limit, true }
