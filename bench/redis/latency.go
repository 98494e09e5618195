package main

import (
	"context"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// latency is the acquire+release p50 of each library and the PING p50.
type latency struct {
	ping time.Duration
	p50  map[string]time.Duration
}

// latencies measures PING and, for each library, an uncontended acquire
// followed by a release, round by round across the libraries.
func latencies() (latency, error) {
	ctx := context.Background()
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
	samples := map[string][]time.Duration{}
	name := "latency"
	for i := range *n + 100 {
		start := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			return latency{}, err
		}
		if i >= 100 { // warm-up rounds load scripts and fill pools
			samples["ping"] = append(samples["ping"], time.Since(start))
		}
		for _, lib := range libs {
			start := time.Now()
			unlock, err := lockers[lib].lock(ctx, name)
			if err != nil {
				return latency{}, err
			}
			unlock()
			if i >= 100 {
				samples[lib] = append(samples[lib], time.Since(start))
			}
		}
	}
	res := latency{ping: p(samples["ping"], 50), p50: map[string]time.Duration{}}
	for _, lib := range libs {
		res.p50[lib] = p(samples[lib], 50)
	}
	return res, nil
}

// p returns the q-th percentile of ds (sorting ds).
func p(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(float64(len(ds)-1) * q / 100)
	return ds[i]
}
