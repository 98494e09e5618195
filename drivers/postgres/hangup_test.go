package postgres

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// hangupFault ends the session holding the advisory lock key.
type hangupFault func(ctx context.Context, t testing.TB, key int64)

// heldBy selects the session holding advisory lock $1.
const heldBy = `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted
	AND ((classid::bigint << 32) | objid::bigint) = $1`

// hangupGap holds a lock through m, with another session blocked in
// pg_advisory_lock for it, runs fault, and returns how long after that
// session got the lock the holder's lock context ended (negative: before).
// The component's ttl is a minute: no renewal probes in between.
func hangupGap(ctx context.Context, t testing.TB, m *component.Mutex, admin *pgx.Conn, name string, fault hangupFault) time.Duration {
	t.Helper()
	l, err := m.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	key := advisoryKey(l.Key())
	waiter, err := pgx.Connect(ctx, testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close(context.WithoutCancel(ctx))
	wpid := waiter.PgConn().PID()
	granted := make(chan time.Time, 1)
	go func() {
		_, err := waiter.Exec(ctx, "SELECT pg_advisory_lock($1)", key)
		at := time.Now()
		if err != nil {
			t.Errorf("the other session's pg_advisory_lock: %v", err)
		}
		granted <- at
	}()
	within(t, 10*time.Second, "the other session to wait for the lock", func() bool {
		var waiting bool
		err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted)", wpid).Scan(&waiting)
		return err == nil && waiting
	})
	fault(ctx, t, key)
	gap := testutil.Overlap(ctx, t, l.Done(), granted)
	if !errors.Is(l.Err(), component.ErrLost) {
		t.Fatalf("lock ended with %v; want ErrLost", l.Err())
	}
	l.Release(ctx)
	return gap
}

// terminateHolder terminates, from admin, the backend holding the lock.
func terminateHolder(admin *pgx.Conn) hangupFault {
	return func(ctx context.Context, t testing.TB, key int64) {
		t.Helper()
		var ok bool
		if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend(pid) FROM ("+heldBy+") h", key).Scan(&ok); err != nil || !ok {
			t.Fatalf("pg_terminate_backend = %v, %v", ok, err)
		}
	}
}

// hangupCases are the faults that end a holder's session, each with the
// DSN the holder connects through.
func hangupCases(t testing.TB, admin *pgx.Conn) []struct {
	name  string
	dsn   string
	fault hangupFault
} {
	t.Helper()
	u, err := url.Parse(testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	p := testutil.NewProxy(t, u.Host)
	u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port()))
	return []struct {
		name  string
		dsn   string
		fault hangupFault
	}{
		{"TerminateBackend", testutil.PostgresDSN(), terminateHolder(admin)},
		{"ResetLink", u.String(), func(context.Context, testing.TB, int64) { p.Cut(); p.Heal() }},
	}
}

// TestHangupTellsHolder: a holder whose backend was terminated, or whose
// link was reset, is told lost within a second of the server giving the
// lock to another session, with no renewal in between (ttl a minute).
func TestHangupTellsHolder(t *testing.T) {
	ctx := ctxT(t)
	admin, err := pgx.Connect(ctx, testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	for _, tc := range hangupCases(t, admin) {
		t.Run(tc.name, func(t *testing.T) {
			m := mutexOn(t, on(t, tc.dsn, Options{}), time.Minute)
			for i := range 3 {
				if gap := hangupGap(ctx, t, m, admin, "hangup-"+strconv.Itoa(i), tc.fault); gap > time.Second {
					t.Fatalf("told lost %v after the server freed the lock", gap)
				}
			}
		})
	}
}

// BenchmarkHangupGap reports how long after the server freed a lock
// (another session got it) its holder was told, for a terminated backend
// and a reset link.
func BenchmarkHangupGap(b *testing.B) {
	ctx := ctxLong(b)
	admin, err := pgx.Connect(ctx, testutil.PostgresDSN())
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	for _, tc := range hangupCases(b, admin) {
		b.Run(tc.name, func(b *testing.B) {
			m := mutexOn(b, on(b, tc.dsn, Options{}), time.Minute)
			gaps := make([]time.Duration, 0, b.N)
			for i := 0; b.Loop(); i++ {
				gaps = append(gaps, hangupGap(ctx, b, m, admin, "gap-"+strconv.Itoa(i), tc.fault))
			}
			testutil.ReportOverlaps(b, gaps)
		})
	}
}

// ctxLong is a context for a benchmark's many faults: ten minutes.
func ctxLong(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	return ctx
}
