package mysql

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/internal/sqltest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// hangupTests are the hang-up tests on MySQL: the holder's connection
// killed (KILL CONNECTION) or its link reset, another session waiting in
// GET_LOCK. Probes are off (ProbeInterval an hour): only the hang-up watch
// can tell the holder in time.
func hangupTests(t testing.TB) sqltest.Hangup {
	admin := openDB(t, testutil.MySQLDSN())
	p, viaProxy := proxied(t, Options{ProbeInterval: time.Hour})
	mutex := func(opts Options) func(testing.TB) *component.Mutex {
		return func(t testing.TB) *component.Mutex { return newMutex(t, opts, time.Minute) }
	}
	kill := func(ctx context.Context, t testing.TB, l *component.Lock) {
		t.Helper()
		var id int64
		if err := admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", lockName(l.Key())).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.ExecContext(ctx, "KILL CONNECTION ?", id); err != nil {
			t.Fatal(err)
		}
	}
	return sqltest.Hangup{
		Cases: []sqltest.HangupCase{
			{Name: "KillConnection", Mutex: mutex(Options{DSN: testutil.MySQLDSN(), ProbeInterval: time.Hour}), Fault: kill},
			{Name: "ResetLink", Mutex: mutex(viaProxy), Fault: func(context.Context, testing.TB, *component.Lock) { p.Cut(); p.Heal() }},
		},
		Waiter: func(ctx context.Context, t testing.TB, l *component.Lock) sqltest.Waiter {
			name := lockName(l.Key())
			waiter, wid := openSession(ctx, t, admin)
			return sqltest.Waiter{
				Block: func(ctx context.Context) error {
					var got sql.NullInt64
					if err := waiter.QueryRowContext(ctx, "SELECT GET_LOCK(?, 30)", name).Scan(&got); err != nil || got.Int64 != 1 {
						return errors.Join(err, errors.New("GET_LOCK did not return 1"))
					}
					return nil
				},
				Waiting: func() bool {
					var n int
					err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND STATE = 'User lock'", wid).Scan(&n)
					return err == nil && n == 1
				},
				Done: func() {
					if _, err := waiter.ExecContext(ctx, "DO RELEASE_LOCK(?)", name); err != nil {
						t.Error(err)
					}
					waiter.Close()
				},
			}
		},
	}
}

// openSession opens a session on db and returns it with its CONNECTION_ID().
func openSession(ctx context.Context, t testing.TB, db *sql.DB) (*sql.Conn, int64) {
	t.Helper()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return conn, id
}

// TestHangupTellsHolder: a holder whose connection the server killed, or
// whose link was reset, is told lost without a probe (there is none for an
// hour), within a second of the server giving the lock to another session.
func TestHangupTellsHolder(t *testing.T) { hangupTests(t).Test(t) }

// BenchmarkHangupGap reports how long after the server freed a lock
// (another session got it) its holder was told, for a killed connection
// and a reset link: percentiles over b.N faults.
func BenchmarkHangupGap(b *testing.B) { hangupTests(b).Bench(b) }
