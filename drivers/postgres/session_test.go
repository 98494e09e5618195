package postgres

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
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

	// d's session has been idle for more than idle_session_timeout since
	// its Acquire (the time is what is tested here)
	time.Sleep(400 * time.Millisecond)
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
	limited := on(t, "postgres://"+role+"@127.0.0.1:5432/test?sslmode=disable", Options{Table: table, MaxSessions: 4})
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
