package postgres

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestRefusedParamHidden: a password piece after an unquoted space or a
// stray ' (key=value) or an unencoded & (a URL's query) is read by pgx as
// a runtime parameter; the server refuses it at startup and its FATAL
// quoted the piece ("unrecognized configuration parameter", "invalid value
// for parameter"), in every acquire error. The error now keeps the
// SQLSTATE, names the url key and shows no parameter; the printed driver
// shows no piece either. Legitimate runtime parameters still work.
func TestRefusedParamHidden(t *testing.T) {
	cc, err := pgconn.ParseConfig(testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	kv := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable ", cc.Host, cc.Port, cc.User, cc.Database)
	u := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", url.PathEscape(cc.User), cc.Host, cc.Port, url.PathEscape(cc.Database))
	const want = "url: the server refused a runtime parameter of the connection string"
	cases := []struct {
		name, url, code string
	}{
		{"unquoted space", kv + "password=Pw0 S3cr3tPW=x", "42704"},
		{"unescaped quote", kv + "password='Pw0'S3cr3tPW=x'", "42704"},
		{"space before a known parameter", kv + "password=Pw0 statement_timeout=S3cr3tPW", "22023"},
		{"space before a fixed parameter", kv + "password=Pw0 data_directory=S3cr3tPW", "55P02"},
		{"unencoded & in the query", u + "&password=Pw0&S3cr3tPW=x", "42704"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []string{ModeAdvisory, ModeTable} {
				d, err := fromSpec(map[string]any{"url": tc.url, "mode": mode}, nil)
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				_, err = d.Acquire(ctxT(t), drivers.AcquireRequest{Key: "k", Token: "t", TTL: time.Minute})
				printed := fmt.Sprintf("%v", d)
				closeDriver(t, d)
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != tc.code || !strings.Contains(err.Error(), want) {
					t.Fatalf("%s: Acquire = %v; want SQLSTATE %s and %q", mode, err, tc.code, want)
				}
				for _, p := range secretPieces {
					if strings.Contains(err.Error(), p) || strings.Contains(printed, p) {
						t.Fatalf("%s: error %q or printed driver %s shows %q", mode, err, printed, p)
					}
				}
			}
		})
	}
	t.Run("PGOPTIONS", func(t *testing.T) {
		for k, v := range map[string]string{"PGHOST": cc.Host, "PGPORT": fmt.Sprint(cc.Port), "PGUSER": cc.User,
			"PGDATABASE": cc.Database, "PGSSLMODE": "disable", "PGOPTIONS": "-c " + secretPW + "=x"} {
			t.Setenv(k, v)
		}
		d, err := fromSpec(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.Acquire(ctxT(t), drivers.AcquireRequest{Key: "k", Token: "t", TTL: time.Minute})
		closeDriver(t, d)
		if want := "the PG* environment variables or the service file: the server refused"; err == nil ||
			!strings.Contains(err.Error(), want) || strings.Contains(err.Error(), secretPW) {
			t.Fatalf("Acquire = %v; want %q, no password", err, want)
		}
	})
	t.Run("legitimate parameters", func(t *testing.T) {
		wantWorks(t, map[string]any{"url": u + "&application_name=mutexfx.test&search_path=public&statement_timeout=5s"})
		wantWorks(t, map[string]any{"url": kv + "password='S3cr 3tPW=x' application_name=mutexfx.test options='-c lock_timeout=5s'"})
	})
}

// TestSlashInPassword: an unencoded / ends pgx's user info, so that in
// postgres://u:1234/S3cr?a=3tPW@h/db the password's pieces become the
// port, the database name (shown by every connect error) and a runtime
// parameter. A URL with an @ in its query, none in its user info and a :
// in its hosts is refused at url with the %2F hint (an @ in a query is
// fine without that :, or after a user name alone; the hint is needed
// before pgx, which said "invalid port" for postgres://u:S3cr/3tPW?a=b@h);
// and the Options print a URL whose parts redactURL cannot tell as
// "(not shown)": they printed postgres://u:S3cr/3tPW unchanged.
func TestSlashInPassword(t *testing.T) {
	const (
		slash = "an @ in the query after a host with a port must be percent-encoded as %40 (it cannot be told from a / in the password, which must be percent-encoded as %2F"
		port  = "invalid port " + urlHidden
	)
	cases := []struct{ url, want string }{
		{"postgres://u:S3cr/3tPW?a=b@127.0.0.1/test", slash},
		{"postgres://u:1234/S3cr?a=3tPW@127.0.0.1/test", slash},
		{"postgres://u:1234/?S3cr=3tPW@127.0.0.1", slash},
		{"postgres://127.0.0.1:5432/test?password=" + atPW, slash},
		{"postgres://[::1]:5432/test?password=" + atPW, slash},
		{"postgres://u:S3cr/3tPW", port},
		{"postgres://u:S3cr/3tPW?sslmode=disable", port},
		{"postgres://h:S3cr3tPW/test", port},
		{"postgres://u:" + secretPW + "@127.0.0.1:notaport/test", "invalid port " + urlHidden},       // user info: no hint
		{"host=127.0.0.1 port=x password='S3cr/3tPW'", "invalid port " + urlHidden},                  // key=value: no hint
		{"postgres://127.0.0.1/test?password=" + atPW, ""},                                           // no port
		{"postgres://[::1]/test?password=" + atPW, ""},                                               // no port outside []
		{"postgres://alice@127.0.0.1:5432/test?application_name=a@b", ""},                            // a user, no password
		{"postgres:///test?host=127.0.0.1&password=" + atPW, ""},                                     // no hosts part
		{"postgres://u:" + url.PathEscape("S3cr/3tPW") + "@127.0.0.1:5432/test?sslmode=disable", ""}, // %2F
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			d, err := fromSpec(map[string]any{"url": tc.url}, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				closeDriver(t, d)
				return
			}
			if err == nil {
				closeDriver(t, d)
			}
			wantSpecError(t, err, "mutex.orders.driver.url", tc.want)
			for name, s := range formats(Options{URL: tc.url}) {
				if !strings.Contains(s, hiddenURL) {
					t.Errorf("%s = %s; want the URL %s", name, s, hiddenURL)
				}
				for _, p := range append(secretPieces, "@127") {
					if strings.Contains(s, p) {
						t.Errorf("%s = %s: shows %q", name, s, p)
					}
				}
			}
		})
	}
}

// TestRefusesParam: which FATAL errors at startup are taken for a refused
// runtime parameter (their text replaced), with the runtime parameters
// application_name and S3cr3tPW set.
func TestRefusesParam(t *testing.T) {
	params := map[string]string{"application_name": "app", secretPW: "x"}
	cases := []struct {
		name     string
		severity string
		code     string
		msg      string
		want     bool
	}{
		{"unrecognized", "FATAL", "42704", `unrecognized configuration parameter "S3cr3tPW"`, true},
		{"invalid value", "FATAL", "22023", `invalid value for parameter "statement_timeout": "S3cr3tPW"`, true},
		{"cannot be changed", "FATAL", "55P02", `parameter "data_directory" cannot be changed without restarting the server`, true},
		{"PgBouncer", "FATAL", "08P01", "unsupported startup parameter: S3cr3tPW", true},
		{"PgBouncer, at a sentence's end", "FATAL", "08P01", "unsupported startup parameter: s3cr3tpw.", true},
		{"permission", "FATAL", "42501", `permission denied to set parameter "application_name"`, true},
		{"not a parameter", "FATAL", "28P01", `password authentication failed for user "app"`, false},
		{"within a longer name", "FATAL", "08P01", "unsupported startup parameter: application_name_x", false},
		{"not FATAL", "ERROR", "42704", `unrecognized configuration parameter "S3cr3tPW"`, false},
		{"a role error naming a parameter's word", "FATAL", "28000", `role "application_name" does not exist`, false},
		{"a database error naming a parameter's word", "FATAL", "3D000", `database "application_name" does not exist`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pe := &pgconn.PgError{Severity: tc.severity, SeverityUnlocalized: tc.severity, Code: tc.code, Message: tc.msg}
			if got := refusesParam(pe, params); got != tc.want {
				t.Fatalf("refusesParam(%s) = %v; want %v", pe, got, tc.want)
			}
		})
	}
}
