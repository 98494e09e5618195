package main

import (
	"bufio"
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
	"github.com/mutexfx/mutexfx/drivers/mysql"
)

// turn is one acquisition: when Acquire was called and returned, and when
// the holder started and ended its Release.
type turn struct{ call, acquired, release, released int64 }

// handoffs measures, for each mode, 8 workers taking turns on one lock in
// one process (one component) and in 8 processes (a component each).
func handoffs() error {
	fmt.Printf("Hand-off: %d workers, hold %v, %d turns each, each configuration run %d times (median of the runs, [range of wait p99]). gap = next holder's Acquire return − previous holder's Release start (= release, the Release call, + after, from its return); wait = Acquire call to return.\n\n", *procs, *hold, *turns, *reps)
	fmt.Println("| mode | workers in | fair hand-off | gap p50 | gap p99 | release p50 | after p50 | most turns waited | wait p50 | wait p99 [runs] | goal (wait p99) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, c := range []struct {
		mode      string
		processes bool
		liveness  time.Duration // table mode's WaiterLiveness; -1: off (before)
		goal      time.Duration
	}{
		{mysql.ModeAdvisory, false, 0, 20 * time.Millisecond},
		{mysql.ModeAdvisory, true, 0, 20 * time.Millisecond},
		{mysql.ModeTable, false, -1, 20 * time.Millisecond},
		{mysql.ModeTable, false, 0, 20 * time.Millisecond},
		{mysql.ModeTable, true, -1, 40 * time.Millisecond},
		{mysql.ModeTable, true, 0, 40 * time.Millisecond},
	} {
		if (*hmode != "" && c.mode != *hmode) || (*hin == "1" && c.processes) || (*hin == "n" && !c.processes) || (*hfair && c.liveness < 0) {
			continue
		}
		var g50, g99, w50, w99, r50, a50 []time.Duration
		mostTurns := 0
		for range *reps {
			name := "bench-handoff:" + rand.Text()[:8]
			var turns []turn
			var err error
			if c.processes {
				turns, err = handoffProcesses(c.mode, name, c.liveness)
			} else {
				turns, err = handoffGoroutines(c.mode, name, c.liveness)
			}
			if err == nil {
				err = check(turns)
			}
			if err != nil {
				return fmt.Errorf("hand-off %s: %w", c.mode, err)
			}
			gaps, waits, rels, afters, most := analyse(turns)
			mostTurns = max(mostTurns, most)
			g50, g99 = append(g50, pct(gaps, 50)), append(g99, pct(gaps, 99))
			r50, a50 = append(r50, pct(rels, 50)), append(a50, pct(afters, 50))
			w50, w99 = append(w50, pct(waits, 50)), append(w99, pct(waits, 99))
		}
		where := "1 process"
		if c.processes {
			where = fmt.Sprintf("%d processes", *procs)
		}
		fair := "—"
		if c.mode == mysql.ModeTable {
			fair = "off (before)"
			if c.liveness >= 0 {
				fair = "on (after)"
			}
		}
		verdict := "met"
		if med(w99) > c.goal {
			verdict = "NOT met"
		}
		runs := make([]string, len(w99))
		for i, d := range w99 {
			runs[i] = fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond))
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %d | %s | %s [%s] | ≤ %v: %s |\n", c.mode, where, fair,
			ms(med(g50)), ms(med(g99)), ms(med(r50)), ms(med(a50)), mostTurns, ms(med(w50)), ms(med(w99)), strings.Join(runs, ", "), c.goal, verdict)
	}
	return nil
}

// check fails a run that lost turns (every worker takes *turns) or whose
// holders overlapped (an acquisition before the previous holder started
// its release): its numbers would mean nothing.
func check(ts []turn) error {
	if want := *procs * *turns; len(ts) != want {
		return fmt.Errorf("%d turns recorded, want %d", len(ts), want)
	}
	sorted := slices.SortedFunc(slices.Values(ts), func(a, b turn) int { return int(a.acquired - b.acquired) })
	for i := 1; i < len(sorted); i++ {
		if d := sorted[i-1].release - sorted[i].acquired; d > 0 {
			return fmt.Errorf("holders overlapped: turn %d acquired %v before the previous holder released", i, time.Duration(d))
		}
	}
	return nil
}

// analyse returns the gaps between turns, the waits, the releases'
// durations, the times from a release's end to the next holder's Acquire
// return, and the most turns others took while one worker waited (7 for 8
// workers served in order).
func analyse(turns []turn) (gaps, waits, rels, afters []time.Duration, most int) {
	slices.SortFunc(turns, func(a, b turn) int { return int(a.acquired - b.acquired) })
	for i, t := range turns {
		first, _ := slices.BinarySearchFunc(turns, t.call, func(u turn, at int64) int { return int(u.acquired - at) })
		most = max(most, i-first)
		waits = append(waits, time.Duration(t.acquired-t.call))
		rels = append(rels, time.Duration(t.released-t.release))
		if i > 0 {
			gaps = append(gaps, time.Duration(t.acquired-turns[i-1].release))
			afters = append(afters, time.Duration(t.acquired-turns[i-1].released))
		}
	}
	return gaps, waits, rels, afters, most
}

// work runs turns acquisitions of name on m, starting at start.
func work(m *component.Mutex, name string, start time.Time, emit func(turn)) error {
	ctx := context.Background()
	time.Sleep(time.Until(start))
	for range *turns {
		call := time.Now()
		l, err := m.Acquire(ctx, name, component.WithTimeout(time.Minute))
		if err != nil {
			return err
		}
		acquired := time.Now()
		time.Sleep(*hold)
		release := time.Now()
		if ok, err := l.Release(ctx); !ok || err != nil {
			return fmt.Errorf("release %v %v", ok, err)
		}
		emit(turn{call.UnixNano(), acquired.UnixNano(), release.UnixNano(), time.Now().UnixNano()})
	}
	return nil
}

func newMutex(mode string, liveness time.Duration) (*component.Mutex, func(), error) {
	d, err := mysql.New(mysql.Options{DSN: *dsn, Mode: mode, Table: "mutexfx_bench_locks", WaiterLiveness: liveness})
	if err != nil {
		return nil, nil, err
	}
	m, err := component.New(component.Options{Driver: d, Prefix: "bench:", TTL: 10 * time.Second})
	if err != nil {
		return nil, nil, err
	}
	return m, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m.Close(ctx)
		d.Close(ctx)
	}, nil
}

func handoffGoroutines(mode, name string, liveness time.Duration) ([]turn, error) {
	m, done, err := newMutex(mode, liveness)
	if err != nil {
		return nil, err
	}
	defer done()
	// warm up the pool and the schema
	if l, err := m.Acquire(context.Background(), name); err == nil {
		l.Release(context.Background())
	} else {
		return nil, err
	}
	var mu sync.Mutex
	var out []turn
	var wg sync.WaitGroup
	errs := make(chan error, *procs)
	start := time.Now().Add(100 * time.Millisecond)
	for range *procs {
		wg.Go(func() {
			if err := work(m, name, start, func(t turn) { mu.Lock(); out = append(out, t); mu.Unlock() }); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return out, <-errs
}

func handoffProcesses(mode, name string, liveness time.Duration) ([]turn, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	start := time.Now().Add(2 * time.Second) // room for the processes to start
	var mu sync.Mutex
	var out []turn
	var wg sync.WaitGroup
	errs := make(chan error, *procs)
	for range *procs {
		cmd := exec.Command(exe, "-handoff-worker", *dsn, mode, name, strconv.Itoa(*turns), hold.String(), strconv.FormatInt(start.UnixNano(), 10), liveness.String())
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		wg.Go(func() {
			sc := bufio.NewScanner(stdout)
			var bad error
			for sc.Scan() {
				var t turn
				if _, err := fmt.Sscan(sc.Text(), &t.call, &t.acquired, &t.release, &t.released); err != nil {
					bad = fmt.Errorf("worker line %q: %w", sc.Text(), err)
					continue
				}
				mu.Lock()
				out = append(out, t)
				mu.Unlock()
			}
			if err := cmd.Wait(); err != nil {
				errs <- err
			} else if bad != nil {
				errs <- bad
			}
		})
	}
	wg.Wait()
	close(errs)
	return out, <-errs
}

// handoffWorker is one hand-off process: args dsn mode name turns hold
// start liveness.
func handoffWorker(args []string) int {
	if len(args) != 7 {
		fmt.Fprintln(os.Stderr, "worker: bad arguments", strings.Join(args, " "))
		return 2
	}
	*dsn = args[0]
	*turns, _ = strconv.Atoi(args[3])
	*hold, _ = time.ParseDuration(args[4])
	startNs, _ := strconv.ParseInt(args[5], 10, 64)
	liveness, _ := time.ParseDuration(args[6])
	m, done, err := newMutex(args[1], liveness)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	defer done()
	// warm up the pool and the schema on a name of its own, as the
	// goroutines' run does, and fail rather than join late
	if l, err := m.Acquire(context.Background(), "warm:"+rand.Text()); err == nil {
		l.Release(context.Background())
	} else {
		fmt.Fprintln(os.Stderr, "worker: warm-up:", err)
		return 1
	}
	if time.Now().After(time.Unix(0, startNs)) {
		fmt.Fprintln(os.Stderr, "worker: ready after the start time")
		return 1
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	if err := work(m, args[2], time.Unix(0, startNs), func(t turn) { fmt.Fprintln(w, t.call, t.acquired, t.release, t.released) }); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}
