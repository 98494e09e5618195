package postgres

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// heldBy selects the session holding advisory lock $1.
const heldBy = `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted
	AND ((classid::bigint << 32) | objid::bigint) = $1`

// proxied starts a proxy to the shared server, stopped when the test ends,
// and returns it and the DSN through it.
func proxied(t testing.TB) (*testutil.Proxy, string) {
	t.Helper()
	u, err := url.Parse(testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	p := testutil.NewProxy(t, u.Host)
	u.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port()))
	return p, u.String()
}

// hangupTests are the hang-up tests on PostgreSQL: the holder's backend
// terminated (pg_terminate_backend) or its link reset, another session
// waiting in pg_advisory_lock. The component's ttl is a minute: no renewal
// probes in between.
func hangupTests(t testing.TB) sqltest.Hangup {
	admin := connectT(t)
	p, dsn := proxied(t)
	mutex := func(dsn string) func(testing.TB) *component.Mutex {
		return func(t testing.TB) *component.Mutex { return mutexOn(t, on(t, dsn, Options{}), time.Minute) }
	}
	terminate := func(ctx context.Context, t testing.TB, l *component.Lock) {
		t.Helper()
		var ok bool
		if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend(pid) FROM ("+heldBy+") h", advisoryKey(l.Key())).Scan(&ok); err != nil || !ok {
			t.Fatalf("pg_terminate_backend = %v, %v", ok, err)
		}
	}
	return sqltest.Hangup{
		Cases: []sqltest.HangupCase{
			{Name: "TerminateBackend", Mutex: mutex(testutil.PostgresDSN()), Fault: terminate},
			{Name: "ResetLink", Mutex: mutex(dsn), Fault: func(context.Context, testing.TB, *component.Lock) { p.Cut(); p.Heal() }},
		},
		Waiter: func(ctx context.Context, t testing.TB, l *component.Lock) sqltest.Waiter {
			waiter, err := pgx.Connect(ctx, testutil.PostgresDSN())
			if err != nil {
				t.Fatal(err)
			}
			wpid := waiter.PgConn().PID()
			return sqltest.Waiter{
				Block: func(ctx context.Context) error {
					_, err := waiter.Exec(ctx, "SELECT pg_advisory_lock($1)", advisoryKey(l.Key()))
					return err
				},
				Waiting: func() bool {
					var waiting bool
					err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted)", wpid).Scan(&waiting)
					return err == nil && waiting
				},
				Done: func() { _ = waiter.Close(context.WithoutCancel(ctx)) },
			}
		},
	}
}

// TestHangupTellsHolder: a holder whose backend was terminated, or whose
// link was reset, is told lost within a second of the server giving the
// lock to another session, with no renewal in between (ttl a minute).
func TestHangupTellsHolder(t *testing.T) { hangupTests(t).Test(t) }

// BenchmarkHangupGap reports how long after the server freed a lock
// (another session got it) its holder was told, for a terminated backend
// and a reset link.
func BenchmarkHangupGap(b *testing.B) { hangupTests(b).Bench(b) }
