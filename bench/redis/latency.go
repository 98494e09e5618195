package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
	mredis "github.com/mutexfx/mutexfx/drivers/redis"

	"github.com/mutexfx/mutexfx/bench/internal/stats"
)

// latency is the acquire+release p50 of each library and the PING p50,
// and of the mutexfx driver called directly (the component's share is the
// difference).
type latency struct {
	ping   time.Duration
	p50    map[string]time.Duration
	driver time.Duration
	// floor is a bare SET NX PX then DEL: two round trips with no token
	// check and no fence, the least any lock's acquire+release costs.
	floor time.Duration
	// twoPing is two PINGs in a row: the round trips alone of any lock
	// whose acquire and release are one command each.
	twoPing time.Duration
	// wake is the p50 of a Pub/Sub message to another process that sleeps
	// between messages as long as a waiter in a fair queue does
	// (wakeFloor): what a fair hand-off to a waiting process costs at least.
	wake time.Duration
	// ring is the process contention of the hand-off ring (see ring): the
	// acquisitions/s no fair lock across processes can exceed here.
	ring contention
	// p10 is the 10th percentile of every operation above, by name (ping,
	// 2ping, floor, driver and the libraries): on a machine whose round
	// trips are bimodal (fast when the CPUs are awake, slow when one must
	// wake up), the p50 of an operation of one round trip and of one of
	// two land in different modes, and their ratio says little; the p10s
	// compare the operations in the fast mode.
	p10 map[string]time.Duration
}

// latencies measures PING and, for each library, an uncontended acquire
// followed by a release, round by round across the libraries (and the
// mutexfx driver alone), in a new random order each round. Each operation
// gets a cancellable ctx of its own, as a request's: the component passes
// its driver one (the attempt's) whatever its caller's, so the driver-alone
// row given context.Background() would not do the same work.
func latencies() (latency, error) {
	bg := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: *addr})
	defer c.Close()
	lockers := map[string]locker{}
	for _, lib := range libs {
		l, err := open(lib, *addr)
		if err != nil {
			return latency{}, err
		}
		defer l.close()
		lockers[lib] = l
	}
	d, err := mredis.New(mredis.Options{Addrs: []string{*addr}})
	if err != nil {
		return latency{}, err
	}
	defer d.Close(bg)
	name := "latency"
	dreq := drivers.AcquireRequest{Key: "bench:latency:driver", Token: "bench", TTL: 8 * time.Second}
	// The measured operations. Each round runs them all in a new random
	// order: an operation that leaves work behind (rueidislock releases in
	// the background) must not always slow the same next one.
	type op struct {
		name string
		run  func(ctx context.Context) error
	}
	ops := []op{{"ping", func(ctx context.Context) error { return c.Ping(ctx).Err() }}, {"2ping", func(ctx context.Context) error {
		if err := c.Ping(ctx).Err(); err != nil {
			return err
		}
		return c.Ping(ctx).Err()
	}}}
	for _, lib := range libs {
		ops = append(ops, op{lib, func(ctx context.Context) error {
			unlock, err := lockers[lib].lock(ctx, name)
			if err != nil {
				return err
			}
			return unlock()
		}})
	}
	ops = append(ops, op{"driver", func(ctx context.Context) error {
		if res, err := d.Acquire(ctx, dreq); err != nil || !res.Acquired {
			return fmt.Errorf("driver acquire: %+v, %v", res, err)
		}
		_, err := d.Release(ctx, dreq.Key, dreq.Token)
		return err
	}})
	ops = append(ops, op{"floor", func(ctx context.Context) error {
		if err := c.SetNX(ctx, "bench:latency:floor", "x", 8*time.Second).Err(); err != nil {
			return err
		}
		return c.Del(ctx, "bench:latency:floor").Err()
	}})
	samples := map[string][]time.Duration{}
	for i := range *n + 100 {
		for _, j := range rand.Perm(len(ops)) {
			o := ops[j]
			ctx, cancel := context.WithCancel(bg)
			start := time.Now()
			err := o.run(ctx)
			elapsed := time.Since(start)
			cancel()
			if err != nil {
				return latency{}, fmt.Errorf("%s: %w", o.name, err)
			}
			if i >= 100 { // warm-up rounds load scripts and fill pools
				samples[o.name] = append(samples[o.name], elapsed)
			}
		}
	}
	res := latency{ping: p(samples["ping"], 50), p50: map[string]time.Duration{}, driver: p(samples["driver"], 50), floor: p(samples["floor"], 50),
		twoPing: p(samples["2ping"], 50)}
	res.p10 = map[string]time.Duration{}
	for name, ds := range samples {
		res.p10[name] = p(ds, 10)
	}
	for _, lib := range libs {
		res.p50[lib] = p(samples[lib], 50)
	}
	return res, nil
}

// p is stats.Percentile.
var p = stats.Percentile
