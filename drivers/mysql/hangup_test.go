package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// hangupFault ends the connection holding lock name: it returns once the
// fault is done.
type hangupFault func(ctx context.Context, t testing.TB, name string)

// hangupGap holds a lock through m, with another session blocked in
// GET_LOCK for it, runs fault, and returns how long after that session got
// the lock (the server freed it) the holder's lock context ended — 0 when it
// ended first. Probes are off (ProbeInterval an hour): only the hang-up
// watch can tell the holder in time.
func hangupGap(ctx context.Context, t testing.TB, m *component.Mutex, admin *sql.DB, key string, fault hangupFault) time.Duration {
	t.Helper()
	l, err := m.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	name := lockName(l.Key())
	waiter, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	var wid int64
	if err := waiter.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&wid); err != nil {
		t.Fatal(err)
	}
	granted := make(chan time.Time, 1)
	go func() {
		var got sql.NullInt64
		err := waiter.QueryRowContext(ctx, "SELECT GET_LOCK(?, 30)", name).Scan(&got)
		at := time.Now()
		if err != nil || got.Int64 != 1 {
			t.Errorf("the other session's GET_LOCK = %v, %v", got, err)
		}
		granted <- at
	}()
	waitFor(t, 10*time.Second, "the other session to wait in GET_LOCK", func() bool {
		var n int
		err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND STATE = 'User lock'", wid).Scan(&n)
		return err == nil && n == 1
	})
	fault(ctx, t, name)
	gap := testutil.Overlap(ctx, t, l.Done(), granted)
	if !errors.Is(l.Err(), component.ErrLost) {
		t.Fatalf("lock ended with %v; want ErrLost", l.Err())
	}
	l.Release(ctx)
	if _, err := waiter.ExecContext(ctx, "DO RELEASE_LOCK(?)", name); err != nil {
		t.Fatal(err)
	}
	return gap
}

// killHolder kills, from admin, the session holding the lock.
func killHolder(admin *sql.DB) hangupFault {
	return func(ctx context.Context, t testing.TB, name string) {
		t.Helper()
		var id int64
		if err := admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", name).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.ExecContext(ctx, "KILL CONNECTION ?", id); err != nil {
			t.Fatal(err)
		}
	}
}

// cutLink resets every connection through p (the holder's among them).
func cutLink(p *testutil.Proxy) hangupFault {
	return func(context.Context, testing.TB, string) {
		p.Cut()
		p.Heal()
	}
}

// proxiedDSN is the test server's DSN through p.
func proxiedDSN(t testing.TB, p *testutil.Proxy) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(testutil.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port()))
	return cfg.FormatDSN()
}

// hangupCases are the faults that end a holder's connection.
func hangupCases(t testing.TB, admin *sql.DB) []struct {
	name  string
	dsn   string
	fault hangupFault
} {
	p := testutil.NewProxy(t, mysqlAddr(t))
	return []struct {
		name  string
		dsn   string
		fault hangupFault
	}{
		{"KillConnection", testutil.MySQLDSN(), killHolder(admin)},
		{"ResetLink", proxiedDSN(t, p), cutLink(p)},
	}
}

// mysqlAddr is the test server's address.
func mysqlAddr(t testing.TB) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(testutil.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Addr
}

// TestHangupTellsHolder: a holder whose connection the server killed, or
// whose link was reset, is told lost without a probe (there is none for an
// hour), within a second of the server giving the lock to another session.
// Before the hang-up watch, nothing told it until its next renewal.
func TestHangupTellsHolder(t *testing.T) {
	admin := openDB(t, testutil.MySQLDSN())
	for _, tc := range hangupCases(t, admin) {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			m := newMutex(t, Options{DSN: tc.dsn, ProbeInterval: time.Hour}, time.Minute)
			for i := range 3 {
				gap := hangupGap(ctx, t, m, admin, fmt.Sprintf("hangup-%d", i), tc.fault)
				if gap > time.Second {
					t.Fatalf("told lost %v after the server freed the lock", gap)
				}
			}
		})
	}
}

// BenchmarkHangupGap reports how long after the server freed a lock (another
// session got it) its holder was told, for a killed connection and a reset
// link: percentiles over b.N faults.
func BenchmarkHangupGap(b *testing.B) {
	admin := openDB(b, testutil.MySQLDSN())
	for _, tc := range hangupCases(b, admin) {
		b.Run(tc.name, func(b *testing.B) {
			ctx := ctxFor(b, 10*time.Minute)
			m := newMutex(b, Options{DSN: tc.dsn, ProbeInterval: time.Hour}, time.Minute)
			gaps := make([]time.Duration, 0, b.N)
			for i := 0; b.Loop(); i++ {
				gaps = append(gaps, hangupGap(ctx, b, m, admin, "gap-"+strconv.Itoa(i), tc.fault))
			}
			testutil.ReportOverlaps(b, gaps)
		})
	}
}

// ctxFor is a context ending after d or with the test.
func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
