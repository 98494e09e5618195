package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// statementLog records, by name, the driver statements a pool runs.
type statementLog struct {
	testutil.StatementLog
	names map[string]string // SQL text → name
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if name, ok := l.names[data.SQL]; ok {
		l.Add(name)
	} else {
		l.Add("other")
	}
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// tracedTable opens a table-mode driver on a pool of its own whose
// statements log records by name, both closed when the test ends.
func tracedTable(t *testing.T, opts Options) (Driver, *statementLog, *pgxpool.Pool) {
	t.Helper()
	log := &statementLog{}
	cfg, err := pgxpool.ParseConfig(testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = log
	pool, err := pgxpool.NewWithConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	a, err := NewWithPool(pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeDriver(t, a) }) // before the pool's Close
	log.names = map[string]string{tableOf(a).sql.free: "release", tableOf(a).sql.leave: "leave"}
	for _, fs := range []fencedStatements{tableOf(a).sql.plain, tableOf(a).sql.guarded} {
		maps.Copy(log.names, map[string]string{fs.take: "take", fs.turn: "turn", fs.acquire: "acquire", fs.refence: "refence",
			fs.release: "granting release", fs.handover: "handover"})
	}
	return a, log, pool
}

// TestTableRoundTrips counts the statements of table-mode calls: an
// uncontended acquisition of a free row and a release are one round trip
// each; an acquisition that finds the row missing, held or queued for
// takes a second one (the acquire statement), and a failed TryAcquire
// writes nothing to the row. A release that finds drivers queued runs the
// granting release after the plain one. Both with the default options and with
// synchronousCommit and unlogged, whose statements differ.
func TestTableRoundTrips(t *testing.T) {
	type step struct {
		what     string
		call     func(ctx context.Context, a, b Driver, key string) (acquired bool, err error)
		acquired bool
		stmts    []string
		readOnly bool // the row's xmin and xmax are unchanged
	}
	try := func(tok string) func(context.Context, Driver, Driver, string) (bool, error) {
		return func(ctx context.Context, a, _ Driver, key string) (bool, error) {
			res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute})
			if err == nil && res.Acquired && res.Fence == 0 {
				return false, fmt.Errorf("acquired without a fence")
			}
			if err == nil && !res.Acquired && res.HolderTTL <= 0 && tok == "b" {
				return false, fmt.Errorf("HolderTTL %v; want the holder's remaining ttl", res.HolderTTL)
			}
			return res.Acquired, err
		}
	}
	release := func(tok string) func(context.Context, Driver, Driver, string) (bool, error) {
		return func(ctx context.Context, a, _ Driver, key string) (bool, error) { return a.Release(ctx, key, tok) }
	}
	steps := []step{
		{"first acquisition of a name: the row is missing", try("a1"), true, []string{"take", "acquire"}, false},
		{"TryAcquire of a held lock", try("b"), false, []string{"take", "acquire"}, true},
		{"release, nobody queued", release("a1"), true, []string{"release"}, false},
		{"uncontended acquisition of a released row", try("a2"), true, []string{"take"}, false},
		{"handover to a new token, nobody queued", func(ctx context.Context, a, _ Driver, key string) (bool, error) {
			released, res, err := a.Handover(ctx, key, "a2", drivers.AcquireRequest{Key: key, Token: "a2h", TTL: time.Minute})
			return released && res.Acquired && res.Fence > 0, err
		}, true, []string{"handover"}, false},
		{"release again", release("a2h"), true, []string{"release"}, false},
		{"uncontended acquisition again", try("a3"), true, []string{"take"}, false},
		{"another driver queues (untraced)", func(ctx context.Context, _, b Driver, key string) (bool, error) {
			res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "w", TTL: time.Minute, Wait: time.Millisecond})
			return res.Acquired, err
		}, false, nil, false},
		{"handover with a driver queued: a release waking it", func(ctx context.Context, a, _ Driver, key string) (bool, error) {
			released, res, err := a.Handover(ctx, key, "a3", drivers.AcquireRequest{Key: key, Token: "a3h", TTL: time.Minute})
			return released && !res.Acquired, err
		}, true, []string{"handover"}, false},
		{"TryAcquire of a free row a driver queues for", try("a4"), false, []string{"take", "acquire"}, true},
		{"the queued entry dies, the row is taken (untraced)", func(ctx context.Context, a, _ Driver, key string) (bool, error) {
			within(t, 5*time.Second, "the row taken", func() bool {
				res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a5", TTL: time.Minute})
				return err == nil && res.Acquired
			})
			return true, nil
		}, true, nil, false},
		{"another driver queues again (untraced)", func(ctx context.Context, _, b Driver, key string) (bool, error) {
			res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "w2", TTL: time.Minute, Wait: time.Millisecond})
			return res.Acquired, err
		}, false, nil, false},
		{"release with a driver queued: the plain UPDATE finds it, the granting one releases", release("a5"), true,
			[]string{"release", "granting release"}, false},
	}
	for _, opts := range []Options{
		{Mode: ModeTable},
		{Mode: ModeTable, Table: "mutexfx_locks_rt_unlogged", Unlogged: true, SynchronousCommit: "off"},
	} {
		t.Run(fmt.Sprintf("unlogged=%v,synchronousCommit=%q", opts.Unlogged, opts.SynchronousCommit), func(t *testing.T) {
			ctx := ctxT(t)
			a, log, _ := tracedTable(t, opts)
			b := shared(t, opts)
			// the schema, created at first use, is not counted
			if _, _, err := a.Inspect(ctx, "roundtrips:warm"); err != nil {
				t.Fatal(err)
			}
			key := fmt.Sprintf("roundtrips:%s:%d", t.Name(), time.Now().UnixNano())
			version := func() string {
				var v string
				err := tableOf(b).run(ctx, func(ctx context.Context, p querier) error {
					return p.QueryRow(ctx, "SELECT xmin::text || '/' || xmax::text FROM "+baseOf(a).names.table+" WHERE id = $1", sqlkit.KeyHash(key)).Scan(&v)
				})
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			for _, s := range steps {
				log.Take()
				var before string
				if s.readOnly {
					before = version()
				}
				got, err := s.call(ctx, a, b, key)
				if err != nil || got != s.acquired {
					t.Fatalf("%s: = %v, %v; want %v", s.what, got, err, s.acquired)
				}
				if stmts := log.Take(); s.stmts != nil && !slices.Equal(stmts, s.stmts) {
					t.Fatalf("%s: statements %q; want %q", s.what, stmts, s.stmts)
				}
				if s.readOnly {
					if after := version(); after != before {
						t.Fatalf("%s: row version %s → %s; want it unwritten", s.what, before, after)
					}
				}
			}
		})
	}
}

// TestTableTurn: a waiter woken by the release that hands it its turn takes
// the lock with the turn statement alone (no acquire statement after it),
// with a fence above the releaser's, and leaves the row's queue. Its polls
// are put off past the wait, and its entry's restamp to 300 ms, still
// within WaiterLiveness: a poll or a restamp that came first under load
// would take the lock with another statement (a restamp at 100 ms did,
// at load 3).
func TestTableTurn(t *testing.T) {
	defer func(f func(time.Duration) time.Duration, r time.Duration) { pollDelay, restamp = f, r }(pollDelay, restamp)
	pollDelay = func(time.Duration) time.Duration { return time.Hour }
	restamp = WaiterLiveness * 3 / 4
	ctx := ctxT(t)
	a, log, pool := tracedTable(t, Options{Mode: ModeTable})
	b := shared(t, Options{Mode: ModeTable})
	key := fmt.Sprintf("turn:%d", time.Now().UnixNano())
	held, err := b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "b", TTL: time.Minute})
	if err != nil || !held.Acquired {
		t.Fatalf("Acquire = %+v, %v", held, err)
	}
	got := drivertest.AcquireAsync(ctx, a, drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Minute, Wait: time.Minute})
	queued := func() bool {
		var in bool
		err := pool.QueryRow(ctx, "SELECT queue ? $2 FROM mutexfx_locks WHERE id = $1", sqlkit.KeyHash(key), tableOf(a).id).Scan(&in)
		return err == nil && in
	}
	within(t, 10*time.Second, "the waiter queues", queued)
	log.Take()
	if ok, err := b.Release(ctx, key, "b"); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	r := <-got
	if r.Err != nil || !r.Res.Acquired || r.Res.Fence <= held.Fence {
		t.Fatalf("Acquire = %+v, %v; want acquired with a fence above %d", r.Res, r.Err, held.Fence)
	}
	if stmts := log.Take(); len(stmts) == 0 || stmts[len(stmts)-1] != "turn" {
		t.Fatalf("statements after the release %q; want the turn last", stmts)
	}
	if queued() {
		t.Fatal("the new holder is still queued")
	}
}
