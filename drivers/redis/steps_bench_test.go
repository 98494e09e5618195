package redis

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
)

// BenchmarkRoundTripSteps decomposes the component's share of an
// uncontended acquire+release: each loop runs PING, the driver alone
// (Wait 0 and short token, as bench/redis's "driver"), the driver with the
// component's 64-byte token, with its Wait, with both and the component's
// kind of context (cancelable, with a deadline), and the component's
// TryAcquire and Acquire, in a new random order; it reports each one's
// p10 and p50 in µs (percentiles, not means: on a shared machine a mean
// is its stalls) and the process's CPU per run (all threads). For the
// component it also reports the p10 and p50 of its own time (the step's
// less its driver's Acquire and Release calls), whole and in four parts:
// before and after the driver's acquire, before and after its release.
func BenchmarkRoundTripSteps(b *testing.B) {
	ctx := context.Background()
	d := standalone(b, Options{})
	td := &timedDriver{Driver: standalone(b, Options{})}
	m, err := component.New(component.Options{Driver: td, Prefix: "redisbench:", Timeout: component.Forever})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(ctx)
	key := "redisbench:steps:" + strconv.FormatInt(time.Now().UnixNano(), 10)
	long := strings.Repeat("t", 64)
	pair := func(ctx context.Context, wait time.Duration, token string) {
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: token, TTL: 10 * time.Second, Wait: wait})
		if err != nil || !res.Acquired {
			b.Fatalf("%+v %v", res, err)
		}
		if ok, err := d.Release(ctx, key, token); !ok || err != nil {
			b.Fatalf("%v %v", ok, err)
		}
	}
	comp := func(try bool) {
		var l *component.Lock
		var err error
		if try {
			l, err = m.TryAcquire(ctx, "steps")
		} else {
			l, err = m.Acquire(ctx, "steps")
		}
		if err != nil || l == nil {
			b.Fatalf("%v %v", l, err)
		}
		td.mid = time.Now()
		if ok, err := l.Release(ctx); !ok || err != nil {
			b.Fatalf("%v %v", ok, err)
		}
	}
	steps := []struct {
		name string
		run  func()
	}{
		{"ping", func() { d.Client().Ping(ctx) }},
		{"drv", func() { pair(ctx, 0, "bench") }},
		{"drv-tok64", func() { pair(ctx, 0, long) }},
		{"drv-tok64-ctx", func() {
			c, cancel := context.WithCancelCause(ctx)
			pair(limitCtx{c, time.Now().Add(31 * time.Second)}, 0, long)
			cancel(nil)
		}},
		{"drv-wait", func() { pair(ctx, time.Second, "bench") }},
		{"drv-wait-tok64", func() { pair(ctx, time.Second, long) }},
		{"drv-wait-tok64-ctx", func() {
			c, cancel := context.WithCancelCause(ctx)
			pair(limitCtx{c, time.Now().Add(31 * time.Second)}, time.Second, long)
			cancel(nil)
		}},
		{"comp-try", func() { comp(true) }},
		{"comp", func() { comp(false) }},
	}
	samples := make([][]time.Duration, len(steps))
	own := map[string][]time.Duration{} // a component step's time outside its driver's calls
	cpu := make([]time.Duration, len(steps))
	for range 100 { // warm up: scripts loaded, pools filled
		for _, s := range steps {
			s.run()
		}
	}
	for b.Loop() {
		for _, j := range rand.Perm(len(steps)) {
			c0 := processCPU(b)
			td.in = 0
			start := time.Now()
			steps[j].run()
			took := time.Since(start)
			samples[j] = append(samples[j], took)
			cpu[j] += processCPU(b) - c0
			if n := steps[j].name; strings.HasPrefix(n, "comp") {
				own[n] = append(own[n], took-td.in)
				own[n+"-preacq"] = append(own[n+"-preacq"], td.acqIn.Sub(start))
				own[n+"-postacq"] = append(own[n+"-postacq"], td.mid.Sub(td.acqOut))
				own[n+"-prerel"] = append(own[n+"-prerel"], td.relIn.Sub(td.mid))
				own[n+"-postrel"] = append(own[n+"-postrel"], start.Add(took).Sub(td.relOut))
			}
		}
	}
	for i, s := range steps {
		slices.Sort(samples[i])
		n := len(samples[i])
		b.ReportMetric(float64(samples[i][n/10].Nanoseconds())/1e3, s.name+"-p10-µs")
		b.ReportMetric(float64(samples[i][n/2].Nanoseconds())/1e3, s.name+"-p50-µs")
		b.ReportMetric(float64(cpu[i].Nanoseconds())/1e3/float64(n), s.name+"-cpu-µs")
	}
	for name, o := range own {
		slices.Sort(o)
		b.ReportMetric(float64(o[len(o)/10].Nanoseconds())/1e3, name+"-own-p10-µs")
		b.ReportMetric(float64(o[len(o)/2].Nanoseconds())/1e3, name+"-own-p50-µs")
	}
}

// timedDriver adds up the time spent in its driver's Acquire and Release
// calls (one caller at a time), so that a component step's own time is
// its total less that.
type timedDriver struct {
	*Driver
	in                           time.Duration
	acqIn, acqOut, relIn, relOut time.Time
	mid                          time.Time // set by the caller between its acquire and release
}

func (t *timedDriver) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	t.acqIn = time.Now()
	defer func() { t.acqOut = time.Now(); t.in += t.acqOut.Sub(t.acqIn) }()
	return t.Driver.Acquire(ctx, req)
}

func (t *timedDriver) Release(ctx context.Context, key, token string) (bool, error) {
	t.relIn = time.Now()
	defer func() { t.relOut = time.Now(); t.in += t.relOut.Sub(t.relIn) }()
	return t.Driver.Release(ctx, key, token)
}
