// Command postgres benchmarks the mutexfx PostgreSQL driver against the bare
// statements it is built on, in one run on one server, and prints Markdown
// tables: first the hand-offs of 8 workers next to the server's own queue
// (handoff.go), then the acquire+release pairs and the renewal. Usage (from
// the bench module):
//
//	go run ./postgres [-dsn postgres://postgres@127.0.0.1:5432/test?sslmode=disable] [-n 2000] [-repeat 3] [-phases]
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/postgres"

	"github.com/mutexfx/mutexfx/bench/internal/stats"
)

var (
	dsn          = flag.String("dsn", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL")
	n            = flag.Int("n", 2000, "iterations of each pair benchmark")
	handoff      = flag.Int("handoff", 100, "acquisitions per hand-off worker")
	handoffModes = flag.String("handoff-modes", "floor,ring,advisory,table,table-unlogged", "the hand-offs measured, comma-separated (empty: none): "+
		"floor (blocking pg_advisory_lock on plain connections), ring (a LISTEN/NOTIFY baton ring), advisory, table, table-unlogged, table-async")
	repeat     = flag.Int("repeat", 3, "runs of each hand-off configuration, interleaved; the table shows their medians")
	pairs      = flag.Bool("pairs", true, "measure the acquire+release pairs and the renewal")
	showPhases = flag.Bool("phases", false, "split the table modes' hand-offs across processes into their statements and wake-up (the driver on a traced pool)")
	child      = flag.String("child", "", "internal: run as a hand-off worker process in this mode")
	ringIndex  = flag.Int("ring-index", 0, "internal: the ring worker's place in the ring")
)

func main() {
	flag.Parse()
	ctx := context.Background()
	if *child != "" {
		childWorker(ctx, *child)
		return
	}
	// The hand-offs run first, on a quiet server and process: run after
	// the pairs they measured their aftermath (p99 up by ~50%).
	handoffTable(ctx)
	if !*pairs {
		return
	}
	fmt.Println()
	fmt.Println("| benchmark | p50 | p99 | ratio (p50) | walwriter wake-ups per pair |")
	fmt.Println("|---|---|---|---|---|")
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
	findWalwriter(ctx, c)
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
	// the same with another lock of the component held meanwhile: its
	// renewal goroutine then sleeps until that lock's renewal, and an
	// acquisition no longer wakes it (see docs/postgres.md)
	m2 := newMutex(newDriver(postgres.Options{URL: *dsn}), time.Minute)
	closers = append(closers, func() { _ = m2.Close(ctx) })
	must(m2.TryAcquire(ctx, "held-meanwhile"))
	add("mutexfx advisory component TryAcquire+Release (another lock held)", bareAdv, componentPair(ctx, m2))
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
// of 10 in a new random order each round, and prints their rows. The order
// changes because a case's cost can depend on the one before it: with
// synchronous_commit off, a commit wakes the server's walwriter only when a
// full WAL page is written but not yet flushed, which a synchronous commit
// just before prevents (a fixed order gave the first asynchronous case a
// third fewer wake-ups per pair than the next one).
func runPairs(cases []pairCase) {
	for i := range cases {
		for range 100 {
			cases[i].f()
		}
	}
	wakes := make([]int64, len(cases))
	for len(cases[0].times) < *n {
		for _, i := range mrand.Perm(len(cases)) {
			w := walwriterSwitches()
			for range 10 {
				start := time.Now()
				cases[i].f()
				cases[i].times = append(cases[i].times, time.Since(start))
			}
			wakes[i] += walwriterSwitches() - w
		}
	}
	for i, c := range cases {
		var base []time.Duration
		if c.base >= 0 {
			base = cases[c.base].times
		}
		w := ""
		if walwriter > 0 {
			w = fmt.Sprintf("%.2f", float64(wakes[i])/float64(len(c.times)))
		}
		row(c.label, c.times, base, w)
	}
}

// walwriter is the server's walwriter process id when the server runs on
// this machine and its /proc entry is readable, else 0.
var walwriter int

func findWalwriter(ctx context.Context, c *pgx.Conn) {
	var pid int
	if c.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'").Scan(&pid) == nil {
		walwriter = pid
		if walwriterSwitches() < 0 {
			walwriter = 0
		}
	}
}

// walwriterSwitches returns how many times the walwriter went to sleep
// (voluntary context switches): once per wake-up. -1 when unknown.
func walwriterSwitches() int64 {
	if walwriter == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", walwriter))
	if err != nil {
		return -1
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "voluntary_ctxt_switches:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
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

// driverPair is an Acquire+Release of d. It and componentPair run with a
// cancellable ctx, as a request's: the component passes its driver one
// (the attempt's) whatever its caller's, and a driver given
// context.Background() would skip watching it.
func driverPair(ctx context.Context, d postgres.Driver) func() {
	closers = append(closers, func() { _ = d.Close(context.Background()) })
	key := "bench:" + rand.Text()
	return func() {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
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
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		l, err := m.TryAcquire(ctx, name)
		if err != nil {
			panic(fmt.Sprint("try: ", err))
		}
		must(l.Release(ctx))
	}
}

// renewal holds 10,000 rows in table mode and renews them all once, as the
// component does every ttl/3.
func renewal(ctx context.Context) {
	// the statements are counted on the pool (a pgx tracer), not assumed
	cfg := must(pgxpool.ParseConfig(*dsn))
	var stmts statementCounter
	cfg.ConnConfig.Tracer = &stmts
	pool := must(pgxpool.NewWithConfig(ctx, cfg))
	defer pool.Close()
	d := must(postgres.NewWithPool(pool, postgres.Options{Mode: postgres.ModeTable, Table: "mutexfx_bench_logged"}))
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
	const periods = 5
	before := stmts.n.Load()
	for range periods {
		start := time.Now()
		for _, r := range d.Renew(ctx, leases) {
			if r.Err != nil || !r.Held {
				panic(fmt.Sprint(r))
			}
		}
		times = append(times, time.Since(start))
	}
	trips := float64(stmts.n.Load()-before) / periods
	slices.Sort(times)
	fmt.Printf("| renewal of %d held rows (table, one UPDATE … FROM unnest) | %v | max %v | %.1f statements per period (counted) | |\n",
		rows, times[len(times)/2].Round(10*time.Microsecond), times[len(times)-1].Round(10*time.Microsecond), trips)
	for _, l := range leases {
		_, _ = d.Release(ctx, l.Key, l.Token)
	}
}

// statementCounter counts the statements sent on a pool's connections.
type statementCounter struct{ n atomic.Int64 }

// TraceQueryStart counts one statement.
func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

// TraceQueryEnd does nothing.
func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func newDriver(o postgres.Options) postgres.Driver { return must(postgres.New(o)) }

func newMutex(d drivers.Driver, ttl time.Duration) *component.Mutex {
	return must(component.New(component.Options{Driver: d, Prefix: "bench:", TTL: ttl}))
}

// row prints a result line, with the p50 ratio against base when given and
// extra in the last column.
func row(label string, ds, base []time.Duration, extra string) {
	p50, p99 := stats.Percentile(ds, 50), stats.Percentile(ds, 99)
	r := ""
	if base != nil {
		r = fmt.Sprintf("%.2f×", float64(p50)/float64(stats.Percentile(slices.Clone(base), 50)))
	}
	fmt.Printf("| %s | %v | %v | %s | %s |\n", label, p50.Round(time.Microsecond), p99.Round(time.Microsecond), r, extra)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
