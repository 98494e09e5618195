package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

func TestFactoryErrors(t *testing.T) {
	const secret = "s3cr3t-Pa55"
	for _, tc := range []struct {
		name    string
		options map[string]any
		want    string // substring of the error; "" = no error
	}{
		{"defaults", map[string]any{}, ""},
		{"fields", map[string]any{"host": "db", "port": 3307, "database": "x", "username": "u", "password": secret, "mode": "table", "table": "app.locks"}, ""},
		{"durations as ms", map[string]any{"probeInterval": 250, "pollInterval": "5ms", "dialTimeout": "2s"}, ""},
		{"unknown key", map[string]any{"adress": "x"}, "mutex.orders.driver.adress: unknown key"},
		{"old snake_case key", map[string]any{"dial_timeout": "2s"}, `mutex.orders.driver.dial_timeout: unknown key: did you mean "dialTimeout"?`},
		{"old snake_case keys, first named", map[string]any{"renew_batch": 5, "fence_table": "f"}, `mutex.orders.driver.fence_table: unknown key: did you mean "fenceTable"?`},
		{"bad mode", map[string]any{"mode": "lease"}, "mutex.orders.driver.mode: must be"},
		{"bad fence", map[string]any{"fence": "clock"}, "mutex.orders.driver.fence: must be"},
		{"table injection", map[string]any{"table": "locks; DROP TABLE x"}, "mutex.orders.driver.table: invalid identifier"},
		{"table backtick", map[string]any{"table": "lo`cks"}, "mutex.orders.driver.table: invalid identifier"},
		{"table three parts", map[string]any{"table": "a.b.c"}, "mutex.orders.driver.table: invalid identifier"},
		{"table too long", map[string]any{"table": strings.Repeat("t", 65)}, "mutex.orders.driver.table: invalid identifier"},
		{"fence table", map[string]any{"fenceTable": "1"}, "mutex.orders.driver.fenceTable: invalid identifier"},
		{"fence table too long for its holder table", map[string]any{"fenceTable": strings.Repeat("f", 58)}, `mutex.orders.driver.fenceTable: invalid identifier`},
		{"fence table, holder suffix named", map[string]any{"fenceTable": strings.Repeat("f", 58)}, `the driver adds "_holder" for its holder table`},
		{"dsn and host", map[string]any{"dsn": "root@tcp(h:3306)/db", "host": "x"}, "mutex.orders.driver.host: not allowed with dsn"},
		{"bad port", map[string]any{"port": 70000}, "mutex.orders.driver.port: must be 1 to 65535"},
		{"negative probe", map[string]any{"probeInterval": "-1s"}, "mutex.orders.driver.probeInterval"},
		{"waiter liveness off", map[string]any{"waiterLiveness": -1}, ""},
		{"waiter liveness too short", map[string]any{"waiterLiveness": "500us"}, "mutex.orders.driver.waiterLiveness: must be at least 1ms"},
		{"bad tls", map[string]any{"tls": "nope", "password": secret}, "mutex.orders.driver.tls"},
		{"bad dsn with password", map[string]any{"dsn": "root:" + secret + "@tcp(h:3306)/db?timeout=xyz"}, "mutex.orders.driver.dsn: invalid"},
		{"bad dsn no slash", map[string]any{"dsn": "root:" + secret + "@tcp(h:3306)"}, "mutex.orders.driver.dsn: invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Factory().New(drivers.Spec{Path: "mutex.orders.driver", Options: tc.options, Logger: zap.NewNop()})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				d.Close(context.Background())
				return
			}
			if err == nil {
				d.Close(context.Background())
				t.Fatalf("no error; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !errors.Is(err, drivers.ErrOptions) {
				t.Errorf("error %q; want an invalid option containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error leaks the password: %q", err)
			}
		})
	}
}

// TestNewOptionKey: New and NewWithDB report an invalid option as a
// *drivers.OptionsError naming its key ("" for the options as a whole).
func TestNewOptionKey(t *testing.T) {
	db := openDB(t, testutil.MySQLDSN())
	for _, tc := range []struct {
		name string
		new  func() (Driver, error)
		key  string
	}{
		{"mode", func() (Driver, error) { return New(Options{Mode: "lease"}) }, "mode"},
		{"port", func() (Driver, error) { return New(Options{Port: 70000}) }, "port"},
		{"dsn with host", func() (Driver, error) { return New(Options{DSN: "root@tcp(h)/x", Host: "x"}) }, "host"},
		{"bad dsn", func() (Driver, error) { return New(Options{DSN: "root@tcp(h)"}) }, "dsn"},
		{"table", func() (Driver, error) { return NewWithDB(db, Options{Table: "a.b.c"}) }, "table"},
		{"dsn with db", func() (Driver, error) { return NewWithDB(db, Options{DSN: "root@tcp(h)/x"}) }, "dsn"},
		{"pool option with db", func() (Driver, error) { return NewWithDB(db, Options{MaxOpenConns: 3}) }, ""},
		{"nil db", func() (Driver, error) { return NewWithDB(nil, Options{}) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.new()
			var oe *drivers.OptionsError
			if !errors.As(err, &oe) || oe.Key != tc.key || !errors.Is(err, drivers.ErrOptions) {
				t.Fatalf("error %v; want a *drivers.OptionsError at key %q", err, tc.key)
			}
		})
	}
}

func TestOptionsStringRedacts(t *testing.T) {
	for _, o := range []Options{
		{Password: "hunter2hunter2"},
		{DSN: "app:hunter2hunter2@tcp(db:3306)/x"},
	} {
		for _, s := range []string{o.String(), fmt.Sprint(o), fmt.Sprintf("%v", o), fmt.Sprintf("%+v", o)} {
			if strings.Contains(s, "hunter2hunter2") {
				t.Errorf("%q leaks the password", s)
			}
		}
	}
}

// TestConnectionErrorHidesPassword: a refused login names no password.
func TestConnectionErrorHidesPassword(t *testing.T) {
	const secret = "Wr0ng-Pa55word"
	cfg, err := gomysql.ParseDSN(testutil.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	d := openDriver(t, Options{Host: host, Port: p, Username: "mutexfx_nobody", Password: secret, Database: cfg.DBName, DialTimeout: time.Second})
	_, err = d.Acquire(ctxT(t), drivers.AcquireRequest{Key: "k", Token: token(), TTL: time.Second})
	var me *gomysql.MySQLError
	if !errors.As(err, &me) || (me.Number != 1045 && me.Number != 1698) {
		t.Fatalf("Acquire as a user that does not exist = %v; want the server's access denied (1045, or MariaDB's 1698)", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("error leaks the password: %v", err)
	}
}

// TestExistingDB: a driver on the application's pool (directly and through
// the factory's client) works and never closes the pool.
func TestExistingDB(t *testing.T) {
	db := openDB(t, testutil.MySQLDSN())
	if got := Factory().ClientType; got != reflect.TypeFor[*sql.DB]() {
		t.Fatalf("ClientType %v", got)
	}
	for _, mode := range []string{ModeAdvisory, ModeTable} {
		t.Run(mode, func(t *testing.T) {
			ctx := ctxT(t)
			d, err := Factory().New(drivers.Spec{Path: "mutex.x.driver", Options: map[string]any{"mode": mode}, Client: db, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			key, tok := "mysqltest:"+runID+":"+t.Name(), token()
			res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 5 * time.Second})
			if err != nil || !res.Acquired {
				t.Fatalf("Acquire = %+v, %v", res, err)
			}
			if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			if err := d.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if err := db.PingContext(ctx); err != nil {
				t.Fatalf("the application's pool was closed: %v", err)
			}
		})
	}
	for _, tc := range []struct {
		name    string
		options map[string]any
		client  any
		want    string
	}{
		{"dsn with client", map[string]any{"dsn": "root@tcp(h)/x"}, db, "mutex.x.driver.dsn: not allowed with an existing *sql.DB"},
		{"pool option with client", map[string]any{"maxOpenConns": 3}, db, "mutex.x.driver: connection options are not allowed"},
		{"wrong client type", map[string]any{}, "not a db", "mutex.x.driver.client: is a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Factory().New(drivers.Spec{Path: "mutex.x.driver", Options: tc.options, Client: tc.client, Logger: zap.NewNop()})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want %q", err, tc.want)
			}
		})
	}
}

// TestDSNErrorHidesPassword: a DSN that does not parse gives an error
// quoting nothing of it, whatever its password holds (go-sql-driver's
// message may quote any part of the DSN, a piece of the password
// included); printed Options hide such passwords too.
func TestDSNErrorHidesPassword(t *testing.T) {
	for _, pass := range []string{"Sup3rSecret/pw", "Sup3r?Secret", "Sup3r#Secret", "Sup3r@Secret", "Sup3r:Secret", "ab/cd?ef#gh@ij:kl"} {
		for _, dsn := range []string{
			"app:" + pass + "@tcp(127.0.0.1:3306)",
			"app:" + pass + "@tcp(127.0.0.1:3306)/db?timeout=xyz",
			"app:" + pass + "@tcp(127.0.0.1:3306/db",
			"app:" + pass + "@tcp(127.0.0.1:3306)/db?tls=nope",
		} {
			if s := (Options{DSN: dsn}).String(); strings.Contains(s, pass) {
				t.Errorf("Options.String %q shows the password", s)
			}
			d, err := New(Options{DSN: dsn})
			if err == nil {
				d.Close(context.Background())
				continue // parsed: nothing to show
			}
			if !strings.Contains(err.Error(), "dsn: invalid") {
				t.Errorf("DSN %q: error %q; want it to say the dsn is invalid", dsn, err)
			}
			if strings.Contains(err.Error(), "127.0.0.1") {
				t.Errorf("DSN %q: error %q quotes the DSN", dsn, err)
			}
			// the message is one of the fixed ones, which quote nothing
			// (checking for pieces of the password would match the fixed
			// words: "ef" in "preferred")
			if !fixedDSNMessage(strings.TrimPrefix(err.Error(), "dsn: ")) {
				t.Errorf("DSN %q: error %q is not one of the fixed messages", dsn, err)
			}
		}
	}
}

// fixedDSNMessage reports whether msg is one of the messages of a DSN that
// does not parse, which quote none of it.
func fixedDSNMessage(msg string) bool {
	const end = " (the DSN is not shown: it may hold a password)"
	for _, h := range dsnHints {
		if msg == "invalid: "+h.hint+end {
			return true
		}
	}
	return msg == "invalid"+end || msg == dsnProblem("mysql://", nil)+end
}

// TestCapabilities: New returns the mode's mechanism; only the table
// mechanism hands locks over and lists them.
func TestCapabilities(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want bool
	}{{"", false}, {ModeAdvisory, false}, {ModeTable, true}} {
		d, err := New(Options{DSN: testutil.MySQLDSN(), Mode: tc.mode})
		if err != nil {
			t.Fatal(err)
		}
		_, handover := d.(drivers.Handoverer)
		_, lister := d.(drivers.Lister)
		if handover != tc.want || lister != tc.want {
			t.Errorf("mode %q: Handoverer %v, Lister %v; want %v", tc.mode, handover, lister, tc.want)
		}
		if err := d.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
