package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
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

// floorMode is the hand-off of the server's own queue: each worker blocks
// in GET_LOCK(name, timeout) on a connection of its own, the floor the
// drivers' hand-offs across processes compare with.
const floorMode = "floor"

// handoffConfig is one hand-off configuration.
type handoffConfig struct {
	mode      string
	processes bool
	liveness  time.Duration // table mode's WaiterLiveness; -1: off (before)
	goal      time.Duration
	base      int     // the configuration whose wait p99 this one's is compared with (-1: none)
	ratio     float64 // the goal of that ratio
}

// handoffs measures, for each mode, 8 workers taking turns on one lock in
// one process (one component) and in 8 processes (a component each), next
// to the server's own queue (floorMode). Each round runs every
// configuration once, so that the machine's noise falls on all alike.
func handoffs() error {
	fmt.Printf("Hand-off: %d workers, hold %v, %d turns each, each configuration run %d times, interleaved (median of the runs, [range of wait p99]). gap = next holder's Acquire return − previous holder's Release start (= release, the Release call, + after, from its return); wait = Acquire call to return.\n\n", *procs, *hold, *turns, *reps)
	fmt.Println("| mode | workers in | fair hand-off | gap p50 | gap p99 | release p50 | after p50 | most turns waited | wait p50 | wait p99 [runs] | goal (wait p99) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	all := []handoffConfig{
		{floorMode, true, 0, 0, -1, 0},
		{mysql.ModeAdvisory, false, 0, 20 * time.Millisecond, -1, 0},
		{mysql.ModeAdvisory, true, 0, 20 * time.Millisecond, 0, 1.2},
		{mysql.ModeTable, false, -1, 20 * time.Millisecond, -1, 0},
		{mysql.ModeTable, false, 0, 20 * time.Millisecond, -1, 0},
		{mysql.ModeTable, true, -1, 40 * time.Millisecond, 2, 2},
		{mysql.ModeTable, true, 0, 40 * time.Millisecond, 2, 2},
	}
	var cs []handoffConfig
	at := map[int]int{} // index in all → index in cs
	for i, c := range all {
		if (*hmode != "" && c.mode != *hmode && c.mode != floorMode) || (*hin == "1" && c.processes) || (*hin == "n" && !c.processes) || (*hfair && c.liveness < 0) {
			continue
		}
		if b, ok := at[c.base]; ok && c.base >= 0 {
			c.base = b
		} else {
			c.base = -1
		}
		at[i] = len(cs)
		cs = append(cs, c)
	}
	type figures struct{ g50, g99, w50, w99, r50, a50 []time.Duration }
	res := make([]figures, len(cs))
	most := make([]int, len(cs))
	for range *reps {
		for i, c := range cs {
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
			gaps, waits, rels, afters, m := analyse(turns)
			f := &res[i]
			most[i] = max(most[i], m)
			f.g50, f.g99 = append(f.g50, pct(gaps, 50)), append(f.g99, pct(gaps, 99))
			f.r50, f.a50 = append(f.r50, pct(rels, 50)), append(f.a50, pct(afters, 50))
			f.w50, f.w99 = append(f.w50, pct(waits, 50)), append(f.w99, pct(waits, 99))
		}
	}
	for i, c := range cs {
		f := res[i]
		runs := make([]string, len(f.w99))
		for j, d := range f.w99 {
			runs[j] = fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond))
		}
		w99 := med(f.w99)
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
		var goals []string
		if c.base >= 0 {
			r := float64(w99) / float64(med(slices.Clone(res[c.base].w99)))
			goals = append(goals, fmt.Sprintf("%.2f × %s: ≤ %.1f × %s", r, cs[c.base].mode, c.ratio, verdict(r <= c.ratio)))
		}
		if c.goal > 0 {
			goals = append(goals, fmt.Sprintf("≤ %v: %s", c.goal, verdict(w99 <= c.goal)))
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %d | %s | %s [%s] | %s |\n", c.mode, where, fair,
			ms(med(f.g50)), ms(med(f.g99)), ms(med(f.r50)), ms(med(f.a50)), most[i], ms(med(f.w50)), ms(w99), strings.Join(runs, ", "), strings.Join(goals, "; "))
	}
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
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
	if args[1] == floorMode {
		return floorWorker(args[2], time.Unix(0, startNs))
	}
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

// floorWorker is a hand-off process of the server's own queue: it takes
// name *turns times with a blocking GET_LOCK on one connection of its own,
// holding it *hold, from start.
func floorWorker(name string, start time.Time) int {
	ctx := context.Background()
	db, err := openDB(true)
	if err == nil {
		defer db.Close()
		err = floorTurns(ctx, db, name, start)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}

func floorTurns(ctx context.Context, db *sql.DB, name string, start time.Time) error {
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var got sql.NullInt64
	if err := c.QueryRowContext(ctx, "SELECT 1").Scan(&got); err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	time.Sleep(time.Until(start))
	for range *turns {
		call := time.Now()
		if err := c.QueryRowContext(ctx, "SELECT GET_LOCK(?, 60)", name).Scan(&got); err != nil || got.Int64 != 1 {
			return fmt.Errorf("GET_LOCK = %v, %v", got, err)
		}
		acquired := time.Now()
		time.Sleep(*hold)
		release := time.Now()
		if err := c.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", name).Scan(&got); err != nil || got.Int64 != 1 {
			return fmt.Errorf("RELEASE_LOCK = %v, %v", got, err)
		}
		fmt.Fprintln(w, call.UnixNano(), acquired.UnixNano(), release.UnixNano(), time.Now().UnixNano())
	}
	return nil
}
