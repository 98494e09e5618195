package main

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mutexfx/mutexfx/bench/internal/stats"
)

// latency is one run's uncontended acquire+release times.
type latency struct {
	rtt      time.Duration            // p50 of a linearizable Get: the round-trip unit
	p50, p99 map[string]time.Duration // by library
}

// latencies measures *n rounds; each round makes a Get and one
// acquire+release of every library, in an order that rotates.
func latencies(eps []string) (latency, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		return latency{}, err
	}
	defer cli.Close()
	lks := map[string]locker{}
	for _, lib := range libs {
		lk, err := open(lib, eps)
		if err != nil {
			return latency{}, err
		}
		defer lk.close()
		lks[lib] = lk
	}
	samples := map[string][]time.Duration{}
	var rtts []time.Duration
	for r := range *n + 50 { // 50 warm-up rounds
		for i := range libs {
			lib := libs[(r+i)%len(libs)]
			start := time.Now()
			unlock, err := lks[lib].lock(ctx, "latency")
			if err != nil {
				return latency{}, err
			}
			if err := unlock(ctx); err != nil {
				return latency{}, err
			}
			if r >= 50 {
				samples[lib] = append(samples[lib], time.Since(start))
			}
		}
		start := time.Now()
		if _, err := cli.Get(ctx, "bench-rtt"); err != nil {
			return latency{}, err
		}
		if r >= 50 {
			rtts = append(rtts, time.Since(start))
		}
	}
	lat := latency{rtt: stats.Percentile(rtts, 50), p50: map[string]time.Duration{}, p99: map[string]time.Duration{}}
	for lib, s := range samples {
		lat.p50[lib], lat.p99[lib] = stats.Percentile(s, 50), stats.Percentile(s, 99)
	}
	return lat, nil
}
