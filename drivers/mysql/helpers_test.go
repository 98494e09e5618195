package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"maps"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// runID keeps this run's lock names apart from earlier runs' rows.
var runID = rand.Text()[:8]

func token() string { return rand.Text() }

// openDB opens a pool closed when the test ends; it fails the test when the
// server does not answer.
func openDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = true
	cfg.Logger = &gomysql.NopLogger{}
	c, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(ctxT(t)); err != nil {
		t.Fatalf("MariaDB at %s: %v", cfg.Addr, err)
	}
	return db
}

// openDriver opens a driver closed when the test ends.
func openDriver(t testing.TB, opts Options) Driver {
	t.Helper()
	d, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	return d
}

// newMutex builds a component on a new driver, both closed when the test
// ends. The components of one test share their prefix, hence their locks.
func newMutex(t testing.TB, opts Options, ttl time.Duration) *component.Mutex {
	t.Helper()
	return mutexOn(t, openDriver(t, opts), ttl)
}

// mutexOn builds a component on d, closed when the test ends, with the
// test's prefix, as newMutex does.
func mutexOn(t testing.TB, d Driver, ttl time.Duration) *component.Mutex {
	t.Helper()
	m, err := component.New(component.Options{Driver: d, TTL: ttl, Prefix: "mysqltest:" + runID + ":" + t.Name() + ":"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m.Close(ctx)
	})
	return m
}

// waitFor polls cond until it holds, failing the test after d
// (testutil.Poll).
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.Poll(t, d, what, cond)
}

// killSession kills the server session id and waits until the server no
// longer lists it.
func killSession(ctx context.Context, t testing.TB, admin *sql.DB, id int64) {
	t.Helper()
	if _, err := admin.ExecContext(ctx, "KILL ?", id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the killed session to end", func() bool {
		var n int
		err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n)
		return err == nil && n == 0
	})
}

// lostEvents subscribes to d's Lost events for the test's duration; the
// channel holds up to n of them.
func lostEvents(ctx context.Context, t testing.TB, d Driver, n int) <-chan drivers.Event {
	t.Helper()
	lost := make(chan drivers.Event, n)
	cancel, err := d.Subscribe(ctx, func(ev drivers.Event) {
		if ev.Kind == drivers.Lost {
			select {
			case lost <- ev:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return lost
}

// adv and tab are d's advisory and table mechanisms; coreOf is what
// either shares with the other.
func adv(d Driver) *advisoryDriver { return d.(*advisoryDriver) }
func tab(d Driver) *tableDriver    { return d.(*tableDriver) }
func coreOf(d Driver) *core {
	switch m := d.(type) {
	case *advisoryDriver:
		return &m.core
	case *tableDriver:
		return &m.core
	}
	panic(fmt.Sprintf("mysql: %T is not a mechanism of this package", d))
}

// proxied returns a proxy to the test server (MUTEXFX_MYSQL_DSN) and opts
// set to connect through it as that DSN does.
func proxied(t testing.TB, opts Options) (*testutil.Proxy, Options) {
	t.Helper()
	p, cfg := proxyTo(t)
	opts.Host, opts.Port, opts.Database, opts.Username, opts.Password = "127.0.0.1", p.Port(), cfg.DBName, cfg.User, cfg.Passwd
	return p, opts
}

// proxiedDSN returns a proxy to the test server and the test DSN through
// it, with params (session variables) set.
func proxiedDSN(t testing.TB, params map[string]string) (*testutil.Proxy, string) {
	t.Helper()
	p, cfg := proxyTo(t)
	cfg.Addr = p.Addr
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	maps.Copy(cfg.Params, params)
	return p, cfg.FormatDSN()
}

// proxyTo starts a proxy to the test server, stopped when the test ends,
// and returns it and the test DSN's configuration.
func proxyTo(t testing.TB) (*testutil.Proxy, *gomysql.Config) {
	t.Helper()
	cfg, err := gomysql.ParseDSN(testutil.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	return testutil.NewProxy(t, cfg.Addr), cfg
}
