//go:build mutexfxdeps

// Package deps pins the peers' versions while the benchmarks are written.
package deps

import (
	_ "github.com/bsm/redislock"
	_ "github.com/go-co-op/gocron/v2"
	_ "github.com/go-redsync/redsync/v4"
	_ "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	_ "github.com/mutexfx/mutexfx/drivers"
	_ "github.com/redis/rueidis"
	_ "github.com/redis/rueidis/rueidislock"
	_ "golang.org/x/perf/benchfmt"
)
