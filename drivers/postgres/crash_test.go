package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestAsyncCommitCrashFences crashes a server (immediate stop: what a
// crash leaves, recovered at the next start) while acquisitions committed
// with synchronous_commit off (the driver's table-mode option, or the
// server's setting in advisory mode), and the sequence record covering their
// fences, are still in the server's WAL buffers: those commits are lost, the
// sequence comes back behind the fences already handed out. The fences
// taken after the crash must still be greater (the driver's boot marker,
// an unlogged row the crash empties, makes the first connection after it
// move the sequence 2^32 ahead). Terminated connections without a crash
// must not move it.
func TestAsyncCommitCrashFences(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   Options
		server string // the server's synchronous_commit
	}{
		{"table, synchronousCommit off", Options{Mode: ModeTable, SynchronousCommit: "off"}, "on"},
		{"advisory, the server's synchronous_commit off", Options{Mode: ModeAdvisory}, "off"},
	} {
		t.Run(tc.name, func(t *testing.T) { crashFences(t, tc.opts, tc.server) })
	}
}

func crashFences(t *testing.T, opts Options, serverSync string) {
	srv := testutil.StartPostgres(t)
	ctx := ctxT(t)
	admin := func(sql string, args []any, dest ...any) {
		t.Helper()
		c, err := pgx.Connect(ctx, srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		if dest == nil {
			_, err = c.Exec(ctx, sql, args...)
		} else {
			err = c.QueryRow(ctx, sql, args...).Scan(dest...)
		}
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// the walwriter and bgwriter write WAL out late: a crash loses more
	for _, s := range []string{"ALTER SYSTEM SET wal_writer_delay = '10s'", "ALTER SYSTEM SET wal_writer_flush_after = 0",
		"ALTER SYSTEM SET bgwriter_lru_maxpages = 0", "ALTER SYSTEM SET autovacuum = off",
		"ALTER SYSTEM SET synchronous_commit = " + serverSync,
		"SELECT pg_reload_conf()", "CREATE EXTENSION IF NOT EXISTS pageinspect"} {
		admin(s, nil)
	}
	d := on(t, srv.DSN, opts)
	take := func(d Driver, tok string) uint64 {
		t.Helper()
		req := drivers.AcquireRequest{Key: "crash", Token: tok, TTL: 60e9}
		res, err := d.Acquire(ctx, req)
		if err != nil && d.Mode() == ModeAdvisory {
			// the pinned session's first statement after its termination
			// fails; the next one runs on a new session
			res, err = d.Acquire(ctx, req)
		}
		if err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		if ok, err := d.Release(ctx, "crash", tok); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		return res.Fence
	}
	// terminated connections (no crash): the fences go on from where they were
	before := take(d, "t0")
	terminateClients(t, srv.DSN)
	if f := take(d, "t1"); f <= before || f > before+1000 {
		t.Fatalf("fence after terminated connections %d; want just above %d", f, before)
	}
	// acquisitions until the sequence's newest WAL record is not yet
	// written out (insert position past the write position)
	var lastFence uint64
	unwritten := false
	for i := 0; i < 3000 && !unwritten; i++ {
		lastFence = take(d, fmt.Sprint("a", i))
		admin("SELECT (SELECT lsn FROM page_header(get_raw_page($1, 0))) > pg_current_wal_lsn()",
			[]any{baseOf(d).names.sequence}, &unwritten)
	}
	if !unwritten {
		t.Fatalf("the sequence's WAL record was written out after every one of 3000 acquisitions")
	}
	var mark0, mark1 int64
	admin("SELECT "+crashMarkSQL, nil, &mark0)
	srv.Stop() // immediate: what is in the WAL buffers is lost
	srv.Start()
	// Crash recovery resets the crash mark (what connections outliving a
	// crash compare, see guarded in table_sql.go).
	admin("SELECT "+crashMarkSQL, nil, &mark1)
	if mark1 == mark0 {
		t.Fatalf("crash mark %d unchanged by crash recovery", mark0)
	}
	var last int64
	admin("SELECT last_value FROM "+baseOf(d).names.sequence, nil, &last)
	if uint64(last) >= lastFence {
		t.Fatalf("the sequence came back at %d, the last fence was %d: the crash lost nothing", last, lastFence)
	}
	t.Logf("fence %d taken before the crash; the sequence came back at %d", lastFence, last)
	after := take(on(t, srv.DSN, opts), "b")
	if after <= lastFence {
		t.Fatalf("fence %d after the crash; want > %d, the last before it", after, lastFence)
	}
	t.Logf("fence %d after the crash", after)
}

// TestBootMarker empties the boot marker as a crash would (on the shared
// server, a table of its own): connections that already ran the check go
// on from the sequence's value, a new connection puts the row back and
// moves the sequence 2^32 ahead, once.
// TestBootMarkerSurvivingConnection: with asynchronous commits, a
// connection that outlives a server crash (a pooler's client connection)
// and the crash's forgotten fences:
// the marker's row gone, the shared statistics reset and the sequence set
// back, as a crash with asynchronous commits leaves them. Its next fence
// is still greater than every fence taken before.
func TestBootMarkerSurvivingConnection(t *testing.T) {
	ctx := ctxT(t)
	a := shared(t, Options{Mode: ModeTable, Table: "mutexfx_locks_boottest2", MaxConns: 1, SynchronousCommit: "off"})
	take := func() uint64 { t.Helper(); return bootTake(ctx, t, a) }
	take()
	f1 := take()
	err := tableOf(a).run(ctx, func(ctx context.Context, q querier) error {
		if _, err := q.Exec(ctx, "DELETE FROM "+baseOf(a).names.boot); err != nil {
			return err
		}
		// Crash recovery resets the shared statistics: the crash mark.
		if _, err := q.Exec(ctx, "SELECT pg_stat_reset_shared('bgwriter')"); err != nil {
			return err
		}
		_, err := q.Exec(ctx, "SELECT setval($1::regclass, $2)", baseOf(a).names.sequence, max(int64(f1)-5, 1))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if f2 := take(); f2 <= f1 {
		t.Fatalf("fence %d after %d on a connection that outlived the crash", f2, f1)
	}
}

// TestBootMarker empties the marker as a crash would, but leaves the crash
// mark: connections already checked go on from the sequence's value, the
// next new connection jumps it once.
func TestBootMarker(t *testing.T) {
	ctx := ctxT(t)
	opts := Options{Mode: ModeTable, Table: "mutexfx_locks_boottest", MaxConns: 1}
	a := shared(t, opts)
	take := func(d Driver) uint64 { t.Helper(); return bootTake(ctx, t, d) }
	f1 := take(a)
	err := tableOf(a).run(ctx, func(ctx context.Context, q querier) error {
		_, err := q.Exec(ctx, "DELETE FROM "+baseOf(a).names.boot)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if f2 := take(a); f2 <= f1 || f2 >= f1+bootGap {
		t.Fatalf("fence %d on a checked connection after %d; want no jump", f2, f1)
	}
	f3 := take(shared(t, opts)) // a new connection
	if f3 < f1+bootGap {
		t.Fatalf("fence %d on a new connection after %d; want a jump of 2^32", f3, f1)
	}
	if f4 := take(shared(t, opts)); f4 <= f3 || f4 >= f3+bootGap {
		t.Fatalf("fence %d on another new connection after %d; want one jump only", f4, f3)
	}
	var rows int
	if err := tableOf(a).run(ctx, func(ctx context.Context, q querier) error {
		return q.QueryRow(ctx, "SELECT count(*) FROM "+baseOf(a).names.boot).Scan(&rows)
	}); err != nil || rows != 1 {
		t.Fatalf("boot marker rows = %d, %v; want 1", rows, err)
	}
}

// bootTake acquires and releases the key "boot" through d and returns the
// acquisition's fence.
func bootTake(ctx context.Context, t *testing.T, d Driver) uint64 {
	t.Helper()
	tok := fmt.Sprint(time.Now().UnixNano())
	res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "boot", Token: tok, TTL: time.Minute})
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	if ok, err := d.Release(ctx, "boot", tok); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	return res.Fence
}

// TestGuardWhenAsync: the fence-taking statements compare the crash mark
// exactly when the connection's commits may be asynchronous: the driver's
// own setting, or the session's (the server's, a role's, a pool's).
func TestGuardWhenAsync(t *testing.T) {
	ctx := ctxT(t)
	for _, tc := range []struct {
		name    string
		session string // the given pool's synchronous_commit; "": none given
		opt     string // Options.SynchronousCommit
		want    bool
	}{
		{"own pool", "", "", false},
		{"own pool, synchronousCommit off", "", "off", true},
		{"own pool, synchronousCommit local", "", "local", false},
		{"given pool", "on", "", false},
		{"given pool, synchronousCommit off", "on", "off", true},
		{"given pool asynchronous", "off", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Mode: ModeTable, SynchronousCommit: tc.opt}
			var d Driver
			if tc.session == "" {
				d = shared(t, opts)
			} else {
				cfg, err := pgxpool.ParseConfig(testutil.PostgresDSN())
				if err != nil {
					t.Fatal(err)
				}
				cfg.ConnConfig.RuntimeParams["synchronous_commit"] = tc.session
				p, err := pgxpool.NewWithConfig(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				if d, err = NewWithPool(p, opts); err != nil {
					t.Fatal(err)
				}
				defer closeDriver(t, d)
			}
			var got bool
			if err := tableOf(d).run(ctx, func(ctx context.Context, q querier) error { got = q.b.guard; return nil }); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("guarded = %v, want %v", got, tc.want)
			}
		})
	}
}
