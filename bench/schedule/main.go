// Command schedule compares exclusive schedules across three instances of
// a service whose clocks are skewed: gocron v2 with a distributed locker
// (gocron issue #841 reports double runs) and mutexfx's schedule package,
// on the same scenario and the same stores.
//
//	cd bench && go run ./schedule [-instants 20] [-skew 125ms] [-redis 127.0.0.1:6379]
//
// Each scenario starts three schedulers running one short job (10 ms)
// every second, the instances' clocks offset by -skew, 0 and +skew, and
// counts, for each planned instant of the observation window, how many
// instances ran it. All scenarios run at the same time.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

const (
	period  = time.Second // gocron's cron jobs have a resolution of a second
	jobTime = 10 * time.Millisecond
)

// scenario is one comparison row.
type scenario struct {
	scheduler string // "gocron v2 cron", "gocron v2 duration", "mutexfx schedule"
	locker    string // "memory", "redis"
	skew      time.Duration
	stagger   time.Duration // delay between the instances' starts
	run       func(ctx context.Context, sc *scenario, rec *recorder) error
}

// recorder counts the runs per planned instant.
type recorder struct {
	mu   sync.Mutex
	runs map[int64]int // instant (unix seconds) → runs
}

func (r *recorder) record(planned time.Time) {
	r.mu.Lock()
	r.runs[planned.Round(period).Unix()]++
	r.mu.Unlock()
}

func main() {
	instants := flag.Int("instants", 20, "planned instants observed per scenario")
	skew := flag.Duration("skew", period/8, "clock offset of the early and late instances (±)")
	redisAddr := flag.String("redis", envOr("MUTEXFX_REDIS_ADDR", "127.0.0.1:6379"), "Redis address for the redis rows (\"\" skips them)")
	flag.Parse()

	var rdb *goredis.Client
	if *redisAddr != "" {
		rdb = goredis.NewClient(&goredis.Options{Addr: *redisAddr})
		defer rdb.Close()
		if err := rdb.Ping(context.Background()).Err(); err != nil {
			fmt.Fprintln(os.Stderr, "redis:", err)
			os.Exit(1)
		}
	}
	var scenarios []*scenario
	for _, s := range []time.Duration{0, *skew} {
		scenarios = append(scenarios,
			&scenario{scheduler: "gocron v2 cron job", locker: "memory", skew: s, run: runGocronCron(memoryLocker())},
			&scenario{scheduler: "mutexfx schedule", locker: "memory", skew: s, run: runMutexfx(nil)},
		)
		if rdb != nil {
			scenarios = append(scenarios,
				&scenario{scheduler: "gocron v2 cron job", locker: "redis (redsync)", skew: s, run: runGocronCron(redisLocker(rdb))},
				&scenario{scheduler: "mutexfx schedule", locker: "redis", skew: s, run: runMutexfx(rdb)},
			)
		}
	}
	scenarios = append(scenarios,
		&scenario{scheduler: "gocron v2 duration job", locker: "memory", stagger: period / 3, run: runGocronDuration(memoryLocker())})

	window := time.Duration(*instants) * period
	recs := make([]*recorder, len(scenarios))
	errs := make([]error, len(scenarios))
	start := time.Now()
	var wg sync.WaitGroup
	for i, sc := range scenarios {
		recs[i] = &recorder{runs: map[int64]int{}}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), window+3*period)
			defer cancel()
			errs[i] = sc.run(ctx, sc, recs[i])
		})
	}
	wg.Wait()
	from, to := start.Add(2*period).Truncate(period), start.Add(2*period).Truncate(period).Add(window-period)

	fmt.Printf("three instances, one 10 ms job every %v, %d instants observed (%s–%s)\n\n", period, *instants, from.Format("15:04:05"), to.Format("15:04:05"))
	fmt.Println("| scheduler | lock store | instance clocks | instants | runs | run twice or more | missed |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for i, sc := range scenarios {
		if errs[i] != nil {
			fmt.Printf("| %s | %s | %s | error: %v | | | |\n", sc.scheduler, sc.locker, clocks(sc), errs[i])
			continue
		}
		n, runs, doubles, missed := count(recs[i], from, to)
		fmt.Printf("| %s | %s | %s | %d | %d | %d | %d |\n", sc.scheduler, sc.locker, clocks(sc), n, runs, doubles, missed)
	}
}

func clocks(sc *scenario) string {
	switch {
	case sc.stagger > 0:
		return fmt.Sprintf("in sync, started %v apart", sc.stagger.Round(time.Millisecond))
	case sc.skew == 0:
		return "in sync"
	default:
		return fmt.Sprintf("skewed ±%v", sc.skew)
	}
}

// count returns the instants of [from, to], the runs among them, the
// instants run more than once and those not run.
func count(r *recorder, from, to time.Time) (n, runs, doubles, missed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]int64, 0, len(r.runs))
	for k := range r.runs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for t := from.Unix(); t <= to.Unix(); t++ {
		n++
		c := r.runs[t]
		runs += c
		switch {
		case c == 0:
			missed++
		case c > 1:
			doubles++
		}
	}
	return n, runs, doubles, missed
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
