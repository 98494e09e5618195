package postgres

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestSessionSettingsPinned: a role or database may set statement_timeout
// and idle_session_timeout (here as the connection's startup parameters,
// which is how the server applies them too). The advisory sessions override
// them: a lock held by an idle session outlives idle_session_timeout, and a
// waiting Acquire waits for its own bound, not statement_timeout's.
func TestSessionSettingsPinned(t *testing.T) {
	ctx := ctxT(t)
	dsn := testutil.PostgresDSN() + "&statement_timeout=200&idle_session_timeout=300"
	d, other := on(t, dsn, Options{}), on(t, dsn, Options{})
	key, tok := "settings:"+rand.Text(), rand.Text()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 5 * time.Second}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}

	// other waits in the server for longer than statement_timeout: not an
	// error, not acquired when its wait ends
	start := time.Now()
	res, err := other.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "other", TTL: 5 * time.Second, Wait: 700 * time.Millisecond})
	if err != nil || res.Acquired {
		t.Fatalf("waiting Acquire = %+v, %v after %v; want not acquired, no error", res, err, time.Since(start))
	}
	if e := time.Since(start); e < 600*time.Millisecond {
		t.Fatalf("waiting Acquire gave up after %v; want its 700ms", e)
	}

	// d's session, the lock's holder, has been idle for more than
	// idle_session_timeout since its Acquire, as the server sees it
	admin := connectT(t)
	within(t, 5*time.Second, "the holder idle past idle_session_timeout", func() bool {
		var idle bool
		err := admin.QueryRow(ctx, "SELECT coalesce((SELECT bool_and(a.state = 'idle' AND a.state_change < now() - interval '400 ms') "+
			"FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "+
			"AND ((l.classid::bigint << 32) | l.objid::bigint) = $1), false)", advisoryKey(key)).Scan(&idle)
		if err != nil {
			t.Fatal(err)
		}
		return idle
	})
	if ok, err := d.Extend(ctx, key, tok, 5*time.Second); err != nil || !ok {
		t.Fatalf("Extend after an idle spell = %v, %v; want still held", ok, err)
	}
	if res, err := other.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "other", TTL: 5 * time.Second}); err != nil || res.Acquired {
		t.Fatalf("other Acquire = %+v, %v; want taken", res, err)
	}
	if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
}

// TestTableRoleSettings: a role whose default isolation is serializable,
// or whose lock_timeout is short, makes contended table-mode statements
// fail (serialization failures; lock timeouts on the rows); the driver
// retries them, so no call fails.
func TestTableRoleSettings(t *testing.T) {
	for _, param := range []string{"default_transaction_isolation=serializable", "lock_timeout=1"} {
		t.Run(param, func(t *testing.T) {
			ctx := ctxT(t)
			dsn := testutil.PostgresDSN() + "&" + param
			var wg sync.WaitGroup
			for i := range 6 {
				m := mutexOn(t, on(t, dsn, Options{Mode: ModeTable, Table: "mutexfx_locks_rolesettings"}), 5*time.Second)
				wg.Go(func() {
					for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
						l, err := m.Acquire(ctx, fmt.Sprint("rolesettings:", i%2), component.WithTimeout(5*time.Second))
						if err != nil {
							t.Errorf("Acquire: %v", err)
							continue
						}
						if _, err := l.Release(ctx); err != nil {
							t.Errorf("Release: %v", err)
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestWaiterSessionRefused: when the server refuses the connection a
// blocking wait would use (here the role's CONNECTION LIMIT; also
// max_connections), the wait makes do with the main session instead of
// failing: one attempt, not acquired while the lock is taken, the lock once
// it is free.
func TestWaiterSessionRefused(t *testing.T) {
	ctx := ctxT(t)
	admin, err := pgx.Connect(ctx, testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	role := "mutexfx_limited_" + strings.ToLower(rand.Text()[:8])
	table := "mutexfx_locks_limited"
	if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN CONNECTION LIMIT 1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the drivers close (cleanups run last first)
		for _, q := range []string{"DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := admin.Exec(context.Background(), q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	holder := on(t, testutil.PostgresDSN(), Options{Table: table}) // creates the sequence and the boot marker
	key := "limited:" + rand.Text()
	if res, err := holder.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "holder", TTL: 5 * time.Second}); err != nil || !res.Acquired {
		t.Fatalf("holder: %+v, %v", res, err)
	}
	if _, err := admin.Exec(ctx, "GRANT ALL ON "+table+"_fence, "+table+"_boot TO "+role); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(testutil.PostgresDSN()) // the tests' database, as role
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	limited := on(t, u.String(), Options{Table: table, MaxSessions: 4})
	wait := drivers.AcquireRequest{Key: key, Token: "limited", TTL: 5 * time.Second, Wait: 300 * time.Millisecond}
	if res, err := limited.Acquire(ctx, drivers.AcquireRequest{Key: key + ":other", Token: "limited", TTL: 5 * time.Second}); err != nil || !res.Acquired {
		t.Fatalf("limited, free lock: %+v, %v", res, err) // its main session: the role's one connection
	}
	if res, err := limited.Acquire(ctx, wait); err != nil || res.Acquired {
		t.Fatalf("limited, waiting for a taken lock = %+v, %v; want not acquired, no error", res, err)
	}
	if ok, err := holder.Release(ctx, key, "holder"); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	if res, err := limited.Acquire(ctx, wait); err != nil || !res.Acquired {
		t.Fatalf("limited, waiting for a free lock = %+v, %v; want it", res, err)
	}
}

// TestCancelledByOthers: a statement the server cancels while its call's ctx
// lives (an operator's pg_cancel_backend here; also how PostgreSQL reports,
// now and then, a lock timeout that fired as the wait was granted, as
// TestTableRoleSettings's lock_timeout=1 can show) does not fail the call:
// table mode runs the statement again, an advisory wait counts as not
// acquired yet, and Acquire gets the lock once it is free.
func TestCancelledByOthers(t *testing.T) {
	for _, mode := range []string{ModeAdvisory, ModeTable} {
		t.Run(mode, func(t *testing.T) {
			ctx := ctxT(t)
			// admin watches and cancels; blocker blocks the lock (in a
			// transaction: pg_stat_activity would not change in it)
			var admin, blocker *pgx.Conn
			for _, c := range []**pgx.Conn{&admin, &blocker} {
				conn, err := pgx.Connect(ctx, testutil.PostgresDSN())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = conn.Close(context.Background()) })
				*c = conn
			}
			app := "mutexfx_cancelled_" + mode
			d := on(t, testutil.PostgresDSN()+"&application_name="+app, Options{Mode: mode, Table: "mutexfx_locks_cancelled"})
			m := mutexOn(t, d, 5*time.Second)
			name := "cancelled:" + rand.Text()
			key := "fault:" + name // mutexOn's prefix

			// blocker takes the advisory lock, or locks the row (made by a
			// first acquisition) in a transaction
			block := []string{"SELECT pg_advisory_lock($1)"}
			free, arg := "SELECT pg_advisory_unlock($1)", any(advisoryKey(key))
			if mode == ModeTable {
				l, err := m.Acquire(ctx, name)
				if err == nil {
					_, err = l.Release(ctx)
				}
				if err != nil {
					t.Fatal(err)
				}
				block = []string{"BEGIN", "SELECT 1 FROM " + baseOf(d).names.table + " WHERE id = $1 FOR UPDATE"}
				free, arg = "COMMIT", sqlkit.KeyHash(key)
			}
			for _, q := range block {
				args := []any{arg}
				if !strings.Contains(q, "$1") {
					args = nil
				}
				if _, err := blocker.Exec(ctx, q, args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}

			got := make(chan error, 1)
			go func() {
				l, err := m.Acquire(ctx, name, component.WithTimeout(10*time.Second))
				if err == nil {
					_, err = l.Release(ctx)
				}
				got <- err
			}()
			pid, since := lockWaiter(t, admin, app, time.Time{})
			var cancelled bool
			if err := admin.QueryRow(ctx, "SELECT pg_cancel_backend($1)", pid).Scan(&cancelled); err != nil || !cancelled {
				t.Fatalf("pg_cancel_backend = %v, %v", cancelled, err)
			}
			lockWaiter(t, admin, app, since) // it waits again
			args := []any{arg}
			if free == "COMMIT" {
				args = nil
			}
			if _, err := blocker.Exec(ctx, free, args...); err != nil {
				t.Fatalf("%s: %v", free, err)
			}
			if err := <-got; err != nil {
				t.Fatalf("Acquire after a cancelled statement: %v", err)
			}
		})
	}
}

// lockWaiter waits for a backend of application app to wait for a lock in a
// statement started after since, and returns its pid and the statement's
// start.
func lockWaiter(t *testing.T, admin *pgx.Conn, app string, since time.Time) (pid int32, start time.Time) {
	t.Helper()
	within(t, 5*time.Second, "a statement waiting for the lock", func() bool {
		err := admin.QueryRow(context.Background(), "SELECT pid, query_start FROM pg_stat_activity "+
			"WHERE starts_with(application_name, $1) AND wait_event_type = 'Lock' AND query_start > $2 LIMIT 1", app, since).Scan(&pid, &start)
		if err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		return err == nil
	})
	return pid, start
}

// TestWaiterHungUpBeforeAdopt: a new waiter session is armed for hang-ups
// before waiterSession registers it (adopt). When its connection hangs up in
// between, the watcher's broken runs first and finds it in no list; adopt
// must not list it then: a dead session listed stays there (broken removes
// a session once), is handed to every later blocking wait, whose
// statements fail on it, and takes a place of MaxSessions for good.
func TestWaiterHungUpBeforeAdopt(t *testing.T) {
	ctx := ctxT(t)
	d := on(t, testutil.PostgresDSN(), Options{MaxSessions: 2}).(*advisoryDriver)
	s, err := d.dial(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	// waiterSession's steps after the dial, the hang-up firing after busy
	s.slot.Lock()
	s.busy()
	s.hungUp()
	if d.adopt(ctx, s) {
		s.unlock() // the caller's statement failed on it
	}
	got, err := d.waiterSession(ctx)
	if err != nil || got == nil {
		t.Fatalf("waiterSession = %v, %v; want a new session (the dead one takes no place)", got, err)
	}
	defer got.unlock()
	if got == s || got.dead.Load() {
		t.Fatal("waiterSession handed out the session that hung up before it was adopted")
	}
}
