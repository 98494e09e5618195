package redis

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// BenchmarkHandoff passes one lock back and forth between two drivers (two
// clients, two Pub/Sub connections, as two processes would have) through
// Redis: each holds it handoffHold, releases it (the release script hands
// it to the other, queued meanwhile, and publishes the grant) and asks for
// it again at once. One op is one acquisition. It reports the p50 and p90
// of the hand-off (the release call's start to the other's Acquire
// returning) and of the release call, in µs.
func BenchmarkHandoff(b *testing.B) {
	const handoffHold = 500 * time.Microsecond
	ds := [2]*Driver{standalone(b, Options{}), standalone(b, Options{})}
	key := "redisbench:handoff:" + strconv.FormatInt(time.Now().UnixNano(), 10)
	for _, d := range ds {
		d.listen()
		waitFor(b, "driver subscribed", func() bool { return numSub(b, d, d.channel()) == 1 })
	}
	ctx := b.Context()
	var mu sync.Mutex
	var handoffs, releases []time.Duration
	last := -1         // the driver that released last
	var relStart int64 // when it started (Unix ns)
	left := b.N
	run := func(i int) error {
		req := drivers.AcquireRequest{Key: key, Token: "t" + strconv.Itoa(i), TTL: 10 * time.Second, Wait: 10 * time.Second}
		for {
			res, err := ds[i].Acquire(ctx, req)
			got := time.Now()
			if err != nil || !res.Acquired {
				return err
			}
			mu.Lock()
			if last >= 0 && last != i {
				handoffs = append(handoffs, time.Duration(got.UnixNano()-relStart))
			}
			left--
			done := left < 0
			mu.Unlock()
			time.Sleep(handoffHold)
			rel := time.Now()
			mu.Lock()
			last, relStart = i, rel.UnixNano()
			mu.Unlock()
			if _, err := ds[i].Release(ctx, key, req.Token); err != nil {
				return err
			}
			took := time.Since(rel)
			mu.Lock()
			releases = append(releases, took)
			mu.Unlock()
			if done {
				return nil
			}
		}
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range ds {
		wg.Go(func() { errs[i] = run(i) })
	}
	wg.Wait()
	b.StopTimer()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	report := func(name string, s []time.Duration) {
		if len(s) == 0 {
			return
		}
		slices.Sort(s)
		b.ReportMetric(float64(s[len(s)/2].Nanoseconds())/1e3, name+"-p50-µs")
		b.ReportMetric(float64(s[len(s)*9/10].Nanoseconds())/1e3, name+"-p90-µs")
	}
	report("handoff", handoffs)
	report("release", releases)
}
