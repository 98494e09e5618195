package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/postgres"

	"github.com/mutexfx/mutexfx/bench/internal/stats"
)

// turn is one acquisition of a hand-off run: how long it waited, and when
// (Unix ns, comparable across processes) it got the lock and its release
// started and returned. A traced table-mode worker (-phases) also records
// when its release's UPDATE (which grants the lock to, or wakes, the next
// waiter) ended, when its last attempt started, and how many attempts it
// made.
type turn struct {
	wait                  time.Duration
	got, relStart, relEnd int64
	updated, lastTry      int64
	tries                 int64
}

// fields are a turn's numbers in the order a worker process prints them.
func (t *turn) fields() []*int64 {
	return []*int64{(*int64)(&t.wait), &t.got, &t.relStart, &t.relEnd, &t.updated, &t.lastTry, &t.tries}
}

// handoffConfig is one hand-off configuration: 8 workers taking a lock in
// turn, holding it 1 ms, in one process or in 8.
type handoffConfig struct {
	mode      string
	processes bool
	base      int // the configuration whose wait p99 this one's is compared with (-1: none)
	goal      float64
}

func (c handoffConfig) label() string {
	where := "1 process"
	if c.processes {
		where = "8 processes"
	}
	switch c.mode {
	case floorMode:
		return where + ", floor: blocking pg_advisory_lock (the server's own queue)"
	case ringMode:
		return where + ", floor: LISTEN/NOTIFY baton ring"
	}
	return where + ", mutexfx " + c.mode
}

// handoffTable runs every configuration -repeat times, interleaved (each
// round runs all of them once) so that the machine's noise falls on all
// alike, and prints the medians of the rounds. Advisory mode's wait p99
// across processes is compared with the floor's, the table modes' with
// advisory mode's.
func handoffTable(ctx context.Context) {
	var cs []handoffConfig
	find := func(mode string) int {
		return slices.IndexFunc(cs, func(c handoffConfig) bool { return c.mode == mode && c.processes })
	}
	for _, mode := range strings.Split(*handoffModes, ",") {
		switch {
		case mode == "":
			continue
		case mode == floorMode || mode == ringMode:
			cs = append(cs, handoffConfig{mode: mode, processes: true, base: -1})
		default:
			base, goal := find(floorMode), 1.2
			if mode != postgres.ModeAdvisory {
				base, goal = find(postgres.ModeAdvisory), 2
			}
			cs = append(cs, handoffConfig{mode: mode, base: -1}, handoffConfig{mode: mode, processes: true, base: base, goal: goal})
		}
	}
	if len(cs) == 0 {
		return
	}
	runs := make([][]runStats, len(cs))
	for range *repeat {
		for i, c := range cs {
			var turns []turn
			if c.processes {
				turns = handoffProcesses(c.mode)
			} else {
				turns = handoffInProcess(ctx, c.mode)
			}
			runs[i] = append(runs[i], summarize(turns))
		}
	}
	fmt.Printf("Hand-off: 8 workers taking one lock in turn, holding it 1 ms, %d turns each; medians of %d interleaved runs. "+
		"gap: release start → next holder has it.\n\n", *handoff, *repeat)
	fmt.Println("| configuration | wait p50 | wait p99 [runs] | release p50 | gap p50 | gap p99 | most turns waited | wait p99 ratio | goal |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for i, c := range cs {
		m := medians(runs[i])
		ratio, goal := "", ""
		if c.base >= 0 {
			r := float64(m.waitP99) / float64(medians(runs[c.base]).waitP99)
			ratio = fmt.Sprintf("%.2f × %s", r, cs[c.base].mode)
			goal = fmt.Sprintf("≤ %.1f ×: %s", c.goal, verdict(r <= c.goal))
		}
		if c.mode != floorMode && c.mode != ringMode {
			limit := 15 * time.Millisecond
			if c.processes {
				limit = 40 * time.Millisecond
			}
			goal = strings.TrimPrefix(goal+fmt.Sprintf("; ≤ %v: %s", limit, verdict(m.waitP99 <= limit)), "; ")
		}
		p99s := make([]string, len(runs[i]))
		for j, r := range runs[i] {
			p99s[j] = ms(r.waitP99)
		}
		fmt.Printf("| %s | %s | %s [%s] | %s | %s | %s | %d | %s | %s |\n", c.label(), ms(m.waitP50), ms(m.waitP99), strings.Join(p99s, ", "),
			ms(m.release), ms(m.gapP50), ms(m.gapP99), m.most, ratio, goal)
	}
	if *showPhases {
		printPhases(cs, runs)
	}
	fmt.Println()
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// driverOptions are the options of a driver mode's hand-off workers.
func driverOptions(mode string) postgres.Options {
	o := postgres.Options{URL: *dsn, Mode: mode}
	switch mode {
	case postgres.ModeTable:
		o.Table = "mutexfx_bench_logged"
	case "table-unlogged":
		o.Mode, o.Table, o.Unlogged = postgres.ModeTable, "mutexfx_bench_unlogged", true
	case "table-async":
		o.Mode, o.Table, o.SynchronousCommit = postgres.ModeTable, "mutexfx_bench_async", "off"
	}
	return o
}

// handoffInProcess runs 8 workers of one component, on one driver.
func handoffInProcess(ctx context.Context, mode string) []turn {
	d := newDriver(driverOptions(mode))
	m := newMutex(d, 5*time.Second)
	warm(ctx, d, m)
	defer d.Close(ctx)
	defer m.Close(ctx)
	return handoffWorkers(ctx, m, "handoff-1p-"+mode+rand.Text(), 8, *handoff, nil)
}

// handoffWorkers runs workers goroutines on m taking name in turn, holding
// it 1 ms, and returns their turns; tr, if not nil, traces the driver's
// statements (one worker only).
func handoffWorkers(ctx context.Context, m *component.Mutex, name string, workers, each int, tr *tracer) []turn {
	var mu sync.Mutex
	var turns []turn
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				start := time.Now()
				l, err := m.Acquire(ctx, name, component.WithTimeout(30*time.Second))
				if err != nil {
					panic(err)
				}
				got := time.Now()
				time.Sleep(time.Millisecond)
				relStart := time.Now()
				must(l.Release(ctx))
				t := turn{wait: got.Sub(start), got: got.UnixNano(), relStart: relStart.UnixNano(), relEnd: time.Now().UnixNano()}
				tr.fill(&t)
				mu.Lock()
				turns = append(turns, t)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return turns
}

// warm makes the measured hand-offs start with their connections open: a
// waiting acquisition through m, then (table mode) d takes a private lock,
// queues for it (Wait > 0) and releases it until d's LISTEN connection hears
// the release (a table release notifies when a driver is queued; advisory
// waiters wait in the server and need no LISTEN).
func warm(ctx context.Context, d postgres.Driver, m *component.Mutex) {
	// a waiting acquisition of a private name: opens the connection the
	// measured ones use (advisory: a waiter session; table: the pool)
	l := must(m.Acquire(ctx, "warm:"+rand.Text(), component.WithTimeout(10*time.Second)))
	must(l.Release(ctx))
	if d.Mode() != postgres.ModeTable {
		return
	}
	key := "warm:" + rand.Text()
	heard := make(chan struct{}, 1)
	cancel := must(d.Subscribe(ctx, func(ev drivers.Event) {
		if ev.Kind == drivers.Released && ev.Key == key {
			select {
			case heard <- struct{}{}:
			default:
			}
		}
	}))
	defer cancel()
	for {
		req := drivers.AcquireRequest{Key: key, Token: "holder", TTL: time.Minute}
		if res := must(d.Acquire(ctx, req)); !res.Acquired {
			panic("warm-up lock taken")
		}
		req.Token, req.Wait = "waiter", time.Millisecond
		must(d.Acquire(ctx, req))
		must(d.Release(ctx, key, "holder"))
		select {
		case <-heard:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// handoffProcesses runs one worker in each of 8 processes and returns
// their turns.
func handoffProcesses(mode string) []turn {
	exe := must(os.Executable())
	type proc struct {
		cmd *exec.Cmd
		out *bufio.Scanner
		in  interface{ Close() error }
	}
	var procs []proc
	for i := range 8 {
		cmd := exec.Command(exe, "-child", mode, "-dsn", *dsn, "-handoff", strconv.Itoa(*handoff),
			"-ring-index", strconv.Itoa(i), "-phases="+strconv.FormatBool(*showPhases))
		cmd.Stderr = os.Stderr
		stdout := must(cmd.StdoutPipe())
		stdin := must(cmd.StdinPipe())
		must(0, cmd.Start())
		sc := bufio.NewScanner(stdout)
		if !sc.Scan() || sc.Text() != "ready" {
			panic("child not ready")
		}
		procs = append(procs, proc{cmd, sc, stdin})
	}
	for _, p := range procs {
		_ = p.in.Close() // go
	}
	var turns []turn
	for _, p := range procs {
		for p.out.Scan() {
			var t turn
			for i, f := range strings.Fields(p.out.Text()) {
				*t.fields()[i] = must(strconv.ParseInt(f, 10, 64))
			}
			turns = append(turns, t)
		}
		must(0, p.cmd.Wait())
	}
	return turns
}

// runStats are one run's figures.
type runStats struct {
	waitP50, waitP99, release, gapP50, gapP99 time.Duration
	most                                      int
	phases                                    []time.Duration // see phaseNames; nil when not traced
	granted, tries                            float64
}

// summarize checks a run's turns and returns its figures. In the order
// the lock was held, a turn's gap is from the previous holder's release
// start to its own acquisition, and its most is how many turns others took
// while it waited (7 for 8 workers served in order).
func summarize(turns []turn) runStats {
	slices.SortFunc(turns, func(a, b turn) int { return cmp.Compare(a.got, b.got) })
	var waits, releases, gaps []time.Duration
	var s runStats
	for i, t := range turns {
		if i > 0 && t.got < turns[i-1].relStart {
			// holders overlapped: the run's numbers would mean nothing
			panic(fmt.Sprintf("turn %d got the lock %v before the previous holder released it", i, time.Duration(turns[i-1].relStart-t.got)))
		}
		first, _ := slices.BinarySearchFunc(turns, t.got-int64(t.wait), func(u turn, at int64) int { return cmp.Compare(u.got, at) })
		s.most = max(s.most, i-first)
		waits = append(waits, t.wait)
		releases = append(releases, time.Duration(t.relEnd-t.relStart))
		if i > 0 {
			gaps = append(gaps, time.Duration(t.got-turns[i-1].relStart))
		}
	}
	s.waitP50, s.waitP99 = stats.Percentile(waits, 50), stats.Percentile(waits, 99)
	s.release = stats.Percentile(releases, 50)
	s.gapP50, s.gapP99 = stats.Percentile(gaps, 50), stats.Percentile(gaps, 99)
	s.phases, s.granted, s.tries = tracedPhases(turns)
	return s
}

// medians returns the medians of runs' figures.
func medians(runs []runStats) runStats {
	pick := func(f func(runStats) time.Duration) time.Duration {
		ds := make([]time.Duration, len(runs))
		for i, r := range runs {
			ds[i] = f(r)
		}
		return stats.Median(ds)
	}
	m := runStats{
		waitP50: pick(func(r runStats) time.Duration { return r.waitP50 }),
		waitP99: pick(func(r runStats) time.Duration { return r.waitP99 }),
		release: pick(func(r runStats) time.Duration { return r.release }),
		gapP50:  pick(func(r runStats) time.Duration { return r.gapP50 }),
		gapP99:  pick(func(r runStats) time.Duration { return r.gapP99 }),
	}
	for _, r := range runs {
		m.most = max(m.most, r.most)
	}
	if len(runs) > 0 && runs[0].phases != nil {
		for i := range runs[0].phases {
			m.phases = append(m.phases, pick(func(r runStats) time.Duration { return r.phases[i] }))
		}
		m.granted, m.tries = medianOf(runs, func(r runStats) float64 { return r.granted }), medianOf(runs, func(r runStats) float64 { return r.tries })
	}
	return m
}

// medianOf returns the median of f over runs (the upper one of an even count).
func medianOf(runs []runStats, f func(runStats) float64) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}
