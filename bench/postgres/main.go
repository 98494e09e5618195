// Command postgres benchmarks the mutexfx PostgreSQL driver against the bare
// statements it is built on, in one run on one server, and prints a Markdown
// table. Usage (from the bench module):
//
//	go run ./postgres [-dsn postgres://postgres@127.0.0.1:5432/test?sslmode=disable] [-n 2000]
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/postgres"

	"github.com/mutexfx/mutexfx/bench/internal/stats"
)

var (
	dsn     = flag.String("dsn", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL")
	n       = flag.Int("n", 2000, "iterations of each pair benchmark")
	handoff = flag.Int("handoff", 60, "acquisitions per hand-off worker")
	child   = flag.String("child", "", "internal: run as a hand-off worker process in this mode")
)

func main() {
	flag.Parse()
	ctx := context.Background()
	if *child != "" {
		childWorker(ctx, *child)
		return
	}
	fmt.Println("| benchmark | p50 | p99 | ratio (p50) |")
	fmt.Println("|---|---|---|---|")
	// The hand-off phases run first, on a quiet server and process: run
	// after the pair phase they measured its aftermath (p99 up by ~50%).
	for _, mode := range []string{postgres.ModeAdvisory, postgres.ModeTable} {
		d := newDriver(postgres.Options{URL: *dsn, Mode: mode, Table: "mutexfx_bench_logged"})
		m := newMutex(d, 5*time.Second)
		warm(ctx, d, m)
		waits := handoffWorkers(ctx, m, "handoff-1p-"+mode, 8, *handoff)
		row("hand-off wait, 8 workers, 1 process, 1 ms hold ("+mode+")", waits, nil)
		_ = m.Close(ctx)
		_ = d.Close(ctx)
		row("hand-off wait, 8 processes, 1 ms hold ("+mode+")", handoffProcesses(mode), nil)
	}
	// Every pair benchmark gets its own connection or driver; they are
	// measured interleaved, in rounds of 10 pairs each, so that the noise of
	// a shared machine falls on all of them alike.
	var cases []pairCase
	add := func(label string, base int, f func()) int {
		cases = append(cases, pairCase{label: label, base: base, f: f})
		return len(cases) - 1
	}
	conn := func() *pgx.Conn {
		c := must(pgx.Connect(ctx, *dsn))
		closers = append(closers, func() { _ = c.Close(ctx) })
		return c
	}
	c := conn()
	add("bare SELECT 1", -1, func() { exec1(ctx, c, "SELECT 1") })
	exec1(ctx, c, "CREATE SEQUENCE IF NOT EXISTS mutexfx_bench_fence")
	c1 := conn()
	bareAdv := add("bare pg_try_advisory_lock + pg_advisory_unlock", -1, func() {
		exec1(ctx, c1, "SELECT pg_try_advisory_lock(42)")
		exec1(ctx, c1, "SELECT pg_advisory_unlock(42)")
	})
	c2 := conn()
	add("bare advisory pair with nextval (the driver's SQL)", bareAdv, func() {
		exec1(ctx, c2, "SELECT CASE WHEN pg_try_advisory_lock(43) THEN nextval('mutexfx_bench_fence') ELSE 0 END")
		exec1(ctx, c2, "SELECT pg_advisory_unlock(43)")
	})
	c3 := conn()
	add("bare advisory pair with nextval + pg_notify (maxSessions 1)", bareAdv, func() {
		exec1(ctx, c3, "SELECT CASE WHEN pg_try_advisory_lock(44) THEN nextval('mutexfx_bench_fence') ELSE 0 END")
		exec1(ctx, c3, "WITH u AS MATERIALIZED (SELECT pg_advisory_unlock(44) AS ok) SELECT ok, CASE WHEN ok THEN pg_notify('mutexfx_bench', 'k') END IS NULL FROM u")
	})
	add("mutexfx advisory Acquire+Release (fence)", bareAdv, driverPair(ctx, newDriver(postgres.Options{URL: *dsn})))
	add("mutexfx advisory Acquire+Release (fence, notify: maxSessions 1)", bareAdv,
		driverPair(ctx, newDriver(postgres.Options{URL: *dsn, MaxSessions: 1})))
	m := newMutex(newDriver(postgres.Options{URL: *dsn}), time.Minute)
	closers = append(closers, func() { _ = m.Close(ctx) })
	add("mutexfx advisory component TryAcquire+Release", bareAdv, componentPair(ctx, m))
	for _, v := range []struct {
		label string
		opts  postgres.Options
		setup string
	}{
		{"logged", postgres.Options{Table: "mutexfx_bench_logged"}, ""},
		{"unlogged", postgres.Options{Table: "mutexfx_bench_unlogged", Unlogged: true}, "UNLOGGED"},
		{"synchronous_commit=off", postgres.Options{Table: "mutexfx_bench_async", SynchronousCommit: "off"}, "ASYNC"},
	} {
		bare := add("bare INSERT…ON CONFLICT…RETURNING + DELETE ("+v.label+")", -1, bareTablePair(ctx, conn(), v.setup))
		// a channel nobody listens on: the row measures the statements
		v.opts.URL, v.opts.Mode, v.opts.Channel = *dsn, postgres.ModeTable, "mutexfx_bench_quiet"
		add("mutexfx table Acquire+Release ("+v.label+")", bare, driverPair(ctx, newDriver(v.opts)))
		if v.setup == "ASYNC" {
			// the same driver on a pool the application gave: the
			// statements set synchronous_commit per transaction
			pool := must(pgxpool.New(ctx, *dsn))
			o := v.opts
			o.URL = ""
			add("mutexfx table Acquire+Release ("+v.label+", given pool: set per transaction)", bare,
				driverPair(ctx, must(postgres.NewWithPool(pool, o))))
			closers = append(closers, pool.Close) // after the driver's Close
		}
		if v.label == "logged" {
			// as in an application: a component LISTENs on the channel, so
			// every release wakes its connection
			v.opts.Channel = "mutexfx_bench_heard"
			listener := newDriver(v.opts)
			cancel := must(listener.Subscribe(ctx, func(drivers.Event) {}))
			closers = append(closers, cancel)
			add("mutexfx table Acquire+Release (logged, a LISTEN on the channel)", bare, driverPair(ctx, newDriver(v.opts)))
			closers = append(closers, func() { _ = listener.Close(ctx) })
		}
	}
	runPairs(cases)
	for _, f := range closers {
		f()
	}

	renewal(ctx)
}

// closers close the pair benchmarks' connections and drivers.
var closers []func()

// pairCase is one pair benchmark; base indexes the case its ratio is taken
// against (-1: none).
type pairCase struct {
	label string
	base  int
	f     func()
	times []time.Duration
}

// runPairs warms every case up, times n runs of each, interleaved in rounds
// of 10, and prints their rows.
func runPairs(cases []pairCase) {
	for i := range cases {
		for range 100 {
			cases[i].f()
		}
	}
	for len(cases[0].times) < *n {
		for i := range cases {
			for range 10 {
				start := time.Now()
				cases[i].f()
				cases[i].times = append(cases[i].times, time.Since(start))
			}
		}
	}
	for _, c := range cases {
		var base []time.Duration
		if c.base >= 0 {
			base = cases[c.base].times
		}
		row(c.label, c.times, base)
	}
}

func exec1(ctx context.Context, c *pgx.Conn, sql string, args ...any) {
	rows, err := c.Query(ctx, sql, args...)
	must(0, err)
	for rows.Next() {
	}
	must(0, rows.Err())
}

func bareTablePair(ctx context.Context, c *pgx.Conn, kind string) func() {
	table := "mutexfx_bench_bare_" + strings.ToLower(kind)
	if kind == "" {
		table += "logged"
	}
	unlogged := ""
	if kind == "UNLOGGED" {
		unlogged = "UNLOGGED "
	}
	exec1(ctx, c, "DROP TABLE IF EXISTS "+table)
	exec1(ctx, c, "CREATE "+unlogged+"TABLE "+table+" (id bytea PRIMARY KEY, name text, token text, fence bigint, expires_at timestamptz)")
	if kind == "ASYNC" {
		exec1(ctx, c, "SET synchronous_commit = off") // this connection only
	}
	id := []byte("0123456789abcdef0123456789abcdef")
	return func() {
		exec1(ctx, c, "INSERT INTO "+table+" VALUES ($1, 'bench', 'tok', 1, now() + interval '1 minute') "+
			"ON CONFLICT (id) DO UPDATE SET token = excluded.token WHERE "+table+".expires_at < now() RETURNING fence", id)
		exec1(ctx, c, "DELETE FROM "+table+" WHERE id = $1 AND token = 'tok'", id)
	}
}

func driverPair(ctx context.Context, d *postgres.Driver) func() {
	closers = append(closers, func() { _ = d.Close(context.Background()) })
	key := "bench:" + rand.Text()
	return func() {
		tok := rand.Text()
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute})
		if err != nil || !res.Acquired || res.Fence == 0 {
			panic(fmt.Sprint("acquire: ", res, err))
		}
		if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
			panic(fmt.Sprint("release: ", ok, err))
		}
	}
}

func componentPair(ctx context.Context, m *component.Mutex) func() {
	name := "pair:" + rand.Text()
	return func() {
		l, err := m.TryAcquire(ctx, name)
		if err != nil || l == nil {
			panic(fmt.Sprint("try: ", err))
		}
		must(l.Release(ctx))
	}
}

// handoffWorkers runs workers goroutines on m taking name in turn, holding
// it 1 ms, and returns their waits.
func handoffWorkers(ctx context.Context, m *component.Mutex, name string, workers, each int) []time.Duration {
	var mu sync.Mutex
	var waits []time.Duration
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				start := time.Now()
				l, err := m.Acquire(ctx, name, component.WithTimeout(30*time.Second))
				if err != nil {
					panic(err)
				}
				w := time.Since(start)
				time.Sleep(time.Millisecond)
				must(l.Release(ctx))
				mu.Lock()
				waits = append(waits, w)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return waits
}

// warm makes the measured hand-offs start with their connections open: a
// waiting acquisition through m, then (table mode) d takes a private lock,
// queues for it (Wait > 0) and releases it until d's LISTEN connection hears
// the release (a table release notifies when a driver is queued; advisory
// waiters wait in the server and need no LISTEN).
func warm(ctx context.Context, d *postgres.Driver, m *component.Mutex) {
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

func childWorker(ctx context.Context, mode string) {
	d := newDriver(postgres.Options{URL: *dsn, Mode: mode, Table: "mutexfx_bench_logged"})
	m := newMutex(d, 5*time.Second)
	warm(ctx, d, m)
	// wait for the go signal so that every process contends from the start
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	waits := handoffWorkers(ctx, m, "handoff-8p-"+mode, 1, *handoff)
	for _, w := range waits {
		fmt.Println(int64(w))
	}
	_ = m.Close(ctx)
	_ = d.Close(ctx)
}

func handoffProcesses(mode string) []time.Duration {
	exe := must(os.Executable())
	type proc struct {
		cmd *exec.Cmd
		out *bufio.Scanner
		in  interface{ Close() error }
	}
	var procs []proc
	for range 8 {
		cmd := exec.Command(exe, "-child", mode, "-dsn", *dsn, "-handoff", strconv.Itoa(*handoff))
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
	var waits []time.Duration
	for _, p := range procs {
		for p.out.Scan() {
			v, err := strconv.ParseInt(strings.TrimSpace(p.out.Text()), 10, 64)
			must(0, err)
			waits = append(waits, time.Duration(v))
		}
		must(0, p.cmd.Wait())
	}
	return waits
}

// renewal holds 10,000 rows in table mode and renews them all once, as the
// component does every ttl/3.
func renewal(ctx context.Context) {
	d := newDriver(postgres.Options{URL: *dsn, Mode: postgres.ModeTable, Table: "mutexfx_bench_logged"})
	defer d.Close(ctx)
	const rows = 10000
	leases := make([]drivers.Lease, rows)
	var wg sync.WaitGroup
	prefix := "renew:" + rand.Text() + ":"
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < rows; i += 8 {
				leases[i] = drivers.Lease{Key: prefix + strconv.Itoa(i), Token: rand.Text(), TTL: time.Minute}
				res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: leases[i].Key, Token: leases[i].Token, TTL: time.Minute})
				if err != nil || !res.Acquired {
					panic(fmt.Sprint(res, err))
				}
			}
		})
	}
	wg.Wait()
	var times []time.Duration
	for range 5 {
		start := time.Now()
		for _, r := range d.Renew(ctx, leases) {
			if r.Err != nil || !r.Held {
				panic(fmt.Sprint(r))
			}
		}
		times = append(times, time.Since(start))
	}
	slices.Sort(times)
	fmt.Printf("| renewal of %d held rows (table, one UPDATE … FROM unnest) | %v | max %v | 1 round trip per period |\n",
		rows, times[len(times)/2].Round(10*time.Microsecond), times[len(times)-1].Round(10*time.Microsecond))
	for _, l := range leases {
		_, _ = d.Release(ctx, l.Key, l.Token)
	}
}

func newDriver(o postgres.Options) *postgres.Driver { return must(postgres.New(o)) }

func newMutex(d drivers.Driver, ttl time.Duration) *component.Mutex {
	return must(component.New(component.Options{Driver: d, Prefix: "bench:", TTL: ttl, RetryDelay: 5 * time.Millisecond}))
}

// row prints a result line, with the p50 ratio against base when given.
func row(label string, ds, base []time.Duration) {
	p50, p99 := stats.Percentile(ds, 50), stats.Percentile(ds, 99)
	r := ""
	if base != nil {
		r = fmt.Sprintf("%.2f×", float64(p50)/float64(stats.Percentile(slices.Clone(base), 50)))
	}
	fmt.Printf("| %s | %v | %v | %s |\n", label, p50.Round(time.Microsecond), p99.Round(time.Microsecond), r)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
