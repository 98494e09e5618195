package postgres

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

func TestNewValidates(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		want string // "" = valid
	}{
		{"defaults", Options{}, ""},
		{"table mode", Options{Mode: ModeTable, Table: "locks.mutex_locks"}, ""},
		{"bad mode", Options{Mode: "row"}, "mode"},
		{"table injection", Options{Table: `x"; DROP TABLE y; --`}, "table"},
		{"table three parts", Options{Table: "a.b.c"}, "table"},
		{"table too long", Options{Table: strings.Repeat("t", 58)}, "table"},
		{"table empty part", Options{Table: "a."}, "table"},
		{"channel qualified", Options{Channel: "a.b"}, "channel"},
		{"sslmode with url", Options{URL: "postgres://h/db", SSLMode: "disable"}, "sslMode"},
		{"bad port", Options{Port: 70000}, "port"},
		{"bad synchronous_commit", Options{SynchronousCommit: "maybe"}, "synchronousCommit"},
		{"negative sessions", Options{MaxSessions: -1}, "maxSessions"},
		{"fields", Options{Host: "db", Port: 5433, Database: "app", Username: "u", Password: "p", SSLMode: "require"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New(tc.opts)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				closeDriver(t, d)
				return
			}
			if err == nil || !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v; want ErrOptions naming %q", err, tc.want)
			}
		})
	}
}

func TestPasswordNeverInErrors(t *testing.T) {
	const pw = "s3cr3t-Pa55"
	cases := []Options{
		{URL: "postgres://user:" + pw + "@host:notaport/db"},
		{URL: "postgres://user:" + pw + "@[::1/db"},
		{URL: "host=h port=x password=" + pw},
		{URL: "host=h port=x password='" + pw + "'"},
		{URL: "postgres://user:" + pw + "@127.0.0.1:1/db?sslmode=bogus"},
		{Password: pw, Port: 1, Host: "127.0.0.1", SSLMode: "bogus"},
	}
	for _, o := range cases {
		_, err := New(o)
		if err == nil {
			t.Fatalf("New(%T) succeeded; want an error", o)
		}
		if strings.Contains(err.Error(), pw) {
			t.Fatalf("error contains the password: %v", err)
		}
	}
	// a connection failure names no password either
	port := testutil.FreePort(t)
	for _, mode := range []string{ModeAdvisory, ModeTable} {
		d, err := New(Options{Host: "127.0.0.1", Port: port, Username: "u", Password: pw, SSLMode: "disable", ConnectTimeout: time.Second, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		defer closeDriver(t, d)
		_, err = d.Acquire(ctxT(t), drivers.AcquireRequest{Key: "k", Token: "t", TTL: time.Second})
		if err == nil || strings.Contains(err.Error(), pw) {
			t.Fatalf("%s: Acquire on a closed port = %v; want an error without the password", mode, err)
		}
	}
}

func TestFactory(t *testing.T) {
	f := Factory()
	if f.Type != "postgres" || f.ClientType != reflect.TypeFor[*pgxpool.Pool]() {
		t.Fatalf("Factory = %+v", f)
	}
	cases := []struct {
		name    string
		options map[string]any
		client  any
		want    string
	}{
		{"ok", map[string]any{"url": testutil.PostgresDSN(), "mode": "table", "stallTimeout": 1500}, nil, ""},
		{"unknown key", map[string]any{"adress": "x"}, nil, "mutex.orders.driver.adress: unknown key"},
		{"wrong client", nil, "not a pool", "mutex.orders.driver.client"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := f.New(drivers.Spec{Path: "mutex.orders.driver", Options: tc.options, Client: tc.client, Logger: zap.NewNop()})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				pd := d.(Driver)
				if baseOf(pd).opts.StallTimeout != 1500*time.Millisecond || pd.Mode() != ModeTable {
					t.Fatalf("decoded %+v", baseOf(pd).opts)
				}
				closeDriver(t, d.(Driver))
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v; want %q", err, tc.want)
			}
		})
	}
}

// TestFactoryKeyPaths: each invalid option fails as a *config.Error at its
// own full key path, naming one key, without "postgres: invalid options" in
// its text, and wrapping ErrOptions (as the error of New does). Before, the
// factory rebuilt the error as a plain *config.Error: errors.Is(err,
// ErrOptions) was false through the factory, and so through fx.New.
func TestFactoryKeyPaths(t *testing.T) {
	ctx := ctxT(t)
	pool, err := pgxpool.New(ctx, testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cases := []struct {
		name    string
		options map[string]any
		client  any
		key     string
		msg     string // the whole message
	}{
		{"mode", map[string]any{"mode": "tabel"}, nil, "mode", `must be "advisory" or "table", not "tabel"`},
		{"table", map[string]any{"table": "a b"}, nil, "table", `"a b": each part must match [A-Za-z_][A-Za-z0-9_]*`},
		{"table too long", map[string]any{"table": strings.Repeat("t", 58)}, nil, "table", `"` + strings.Repeat("t", 58) + `": a part is longer than 57 bytes`},
		{"channel", map[string]any{"channel": "a.b"}, nil, "channel", `"a.b": too many dots`},
		{"port too big", map[string]any{"port": 70000}, nil, "port", "must be 1 to 65535, not 70000"},
		{"port negative", map[string]any{"port": -3}, nil, "port", "must be 1 to 65535, not -3"},
		{"synchronousCommit", map[string]any{"synchronousCommit": "maybe"}, nil, "synchronousCommit", `must be on, off, local, remote_write or remote_apply, not "maybe"`},
		{"sslMode", map[string]any{"sslMode": "bogus"}, nil, "sslMode", `must be disable, allow, prefer, require, verify-ca or verify-full, not "bogus"`},
		{"sslMode with url", map[string]any{"url": "postgres://h/db", "sslMode": "disable"}, nil, "sslMode", "not allowed with url (set sslmode in the url)"},
		{"url", map[string]any{"url": "postgress://h/db"}, nil, "url", "scheme must be postgres or postgresql " + urlHidden},
		{"maxSessions", map[string]any{"maxSessions": -3}, nil, "maxSessions", "must be at least 1"},
		{"maxConns", map[string]any{"maxConns": -3}, nil, "maxConns", "must be at least 1"},
		{"connectTimeout", map[string]any{"connectTimeout": "-5s"}, nil, "connectTimeout", "must not be negative"},
		{"stallTimeout", map[string]any{"stallTimeout": "-5s"}, nil, "stallTimeout", "must not be negative"},
		{"both timeouts", map[string]any{"connectTimeout": "-5s", "stallTimeout": "-5s"}, nil, "connectTimeout", "must not be negative"},
		{"url with client", map[string]any{"url": "postgres://h/db"}, pool, "url", "cannot be set with client (the pool's own configuration applies)"},
		{"password with client", map[string]any{"password": "x"}, pool, "password", "cannot be set with client (the pool's own configuration applies)"},
		{"mode with client", map[string]any{"mode": "tabel"}, pool, "mode", `must be "advisory" or "table", not "tabel"`},
		{"host with @", map[string]any{"host": "u:pw@h"}, nil, "host", "must not contain @ (set the user name and password with username and password)"},
		{"url @ in database", map[string]any{"url": "postgres://h/d@b"}, nil, "url", "an @ in the database name must be percent-encoded as %40; so must a / in the user name or password, as %2F " + urlHidden},
		{"url parse error", map[string]any{"url": "postgres://h:x/db"}, nil, "url", "invalid port " + urlHidden},
		{"unknown key", map[string]any{"adress": "x"}, nil, "adress", "unknown key (known: channel, connectTimeout, database, host, maxConns, maxSessions, mode, password, port, sslMode, stallTimeout, synchronousCommit, table, unlogged, url, username)"},
		{"wrong client", nil, "not a pool", "client", "is a string, not a *pgxpool.Pool"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := fromSpec(tc.options, tc.client)
			if err == nil {
				closeDriver(t, d)
			}
			var ce *config.Error
			if !errors.As(err, &ce) || !errors.Is(err, ErrOptions) {
				t.Fatalf("error = %v; want a *config.Error wrapping ErrOptions (errors.Is: %v)", err, errors.Is(err, ErrOptions))
			}
			if want := "mutex.orders.driver." + tc.key + ": " + tc.msg; err.Error() != want || ce.Error() != want {
				t.Fatalf("error = %q (*config.Error %q)\nwant    %q", err, ce, want)
			}
		})
	}
}

// TestExistingPool builds drivers on the application's pool in both modes:
// they work, and closing them leaves the pool open.
func TestExistingPool(t *testing.T) {
	ctx := ctxT(t)
	pool, err := pgxpool.New(ctx, testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	spec := drivers.Spec{Path: "mutex.x.driver", Client: pool, Logger: zap.NewNop()}
	for _, mode := range []string{ModeAdvisory, ModeTable} {
		t.Run(mode, func(t *testing.T) {
			spec.Options = map[string]any{"mode": mode}
			dd, err := Factory().New(spec)
			if err != nil {
				t.Fatal(err)
			}
			d := dd.(Driver)
			key := "pool:" + t.Name() + time.Now().String()
			res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: time.Minute})
			if err != nil || !res.Acquired || res.Fence == 0 {
				t.Fatalf("Acquire = %+v, %v", res, err)
			}
			if ok, err := d.Release(ctx, key, "a"); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			closeDriver(t, d)
			if err := pool.Ping(ctx); err != nil {
				t.Fatalf("pool closed by the driver: %v", err)
			}
		})
	}
	if _, err := NewWithPool(pool, Options{URL: "postgres://x"}); !errors.Is(err, ErrOptions) {
		t.Fatalf("NewWithPool with a URL = %v; want ErrOptions", err)
	}
}

// TestFencesGuarded: the guarded form of every table-mode statement that
// takes a fence compares the crash mark, the plain form does not (see
// guarded in table_sql.go).
func TestFencesGuarded(t *testing.T) {
	o := Options{Mode: ModeTable}.withDefaults()
	n, err := o.validate()
	if err != nil {
		t.Fatal(err)
	}
	for _, txnSync := range []bool{false, true} {
		s := tableSQL(n, o, txnSync)
		for form, fs := range map[string]fencedStatements{"plain": s.plain, "guarded": s.guarded} {
			for name, q := range map[string]string{"take": fs.take, "turn": fs.turn, "acquire": fs.acquire, "refence": fs.refence, "handover": fs.handover} {
				if got := strings.Contains(q, crashMarkSQL); got != (form == "guarded") {
					t.Errorf("%s %s (txnSync %v) compares the crash mark: %v", form, name, txnSync, got)
				}
			}
		}
	}
}

// TestFxNewErrOptions: an invalid option fails fx.New with an error that
// wraps ErrOptions and a *config.Error at the option's full key path, as
// docs/postgres.md says.
func TestFxNewErrOptions(t *testing.T) {
	for _, tc := range []struct{ key, value string }{{"mode", "tabel"}, {"url", "postgress://h/db"}, {"sslMode", "bogus"}} {
		t.Run(tc.key, func(t *testing.T) {
			k := koanf.New(".")
			block := map[string]any{"type": "postgres", tc.key: tc.value}
			if err := k.Load(confmap.Provider(map[string]any{"mutex": map[string]any{"orders": map[string]any{"driver": block}}}, ""), nil); err != nil {
				t.Fatal(err)
			}
			err := fx.New(mutexfx.Module(k, mutexfx.WithDrivers(Factory())), fx.Invoke(func(*mutexfx.Mutex) {}), fx.NopLogger).Err()
			var ce *config.Error
			if !errors.Is(err, ErrOptions) || !errors.As(err, &ce) || ce.Path != "mutex.orders.driver."+tc.key {
				t.Fatalf("fx.New: %v; want ErrOptions and a *config.Error at mutex.orders.driver.%s", err, tc.key)
			}
		})
	}
}
