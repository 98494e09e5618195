package postgres

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
)

// The secret of the connection strings below, and the pieces a parser that
// splits it would show.
const (
	secretPW = "S3cr3tPW"
	atPW     = "S3cr@3tPW" // unescaped @
)

var secretPieces = []string{secretPW, "S3cr", "3tPW"}

// fromSpec builds a driver as fx.New does, at mutex.orders.driver.
func fromSpec(options map[string]any, client any) (Driver, error) {
	d, err := Factory().New(drivers.Spec{Path: "mutex.orders.driver", Options: options, Client: client, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	return d.(Driver), nil
}

// wantSpecError checks that err is an invalid option at path (a
// *config.Error of the factory, or New's *drivers.OptionsError) whose
// message starts with msg and shows no piece of the secret.
func wantSpecError(t *testing.T, err error, path, msg string) {
	t.Helper()
	got, gotMsg, ok := invalidAt(err)
	if !ok || got != path || !strings.HasPrefix(gotMsg, msg) {
		t.Fatalf("error = %q; want an invalid option %s: %s…", err, path, msg)
	}
	for _, p := range secretPieces {
		if strings.Contains(err.Error(), p) {
			t.Fatalf("error %q shows %q, a piece of the password", err, p)
		}
	}
}

// wantWorks acquires and releases a lock on the test database with the
// driver of options, in each mode.
func wantWorks(t *testing.T, options map[string]any) {
	t.Helper()
	for _, mode := range []string{ModeAdvisory, ModeTable} {
		d, err := fromSpec(maps.Collect(func(yield func(string, any) bool) {
			maps.All(options)(yield)
			yield("mode", mode)
		}), nil)
		if err != nil {
			t.Fatal(err)
		}
		key := "connstring:" + t.Name() + ":" + mode
		res, err := d.Acquire(ctxT(t), drivers.AcquireRequest{Key: key, Token: "t", TTL: time.Minute})
		if err != nil || !res.Acquired {
			t.Fatalf("%s: Acquire = %+v, %v", mode, res, err)
		}
		if ok, err := d.Release(ctxT(t), key, "t"); err != nil || !ok {
			t.Fatalf("%s: Release = %v, %v", mode, ok, err)
		}
		closeDriver(t, d)
	}
}

const urlHidden = "(the URL is not shown: it may hold a password)"

// TestURLScheme: a URL's scheme is postgres or postgresql in any case; any
// other scheme, and a string pgx would read as key=value with a parameter
// name that is no identifier (the URL with a mistyped "://"), fail at the
// url key without showing it. Before, the whole URL became a startup
// parameter name, which the server's FATAL quoted in every acquire error.
func TestURLScheme(t *testing.T) {
	const rest = "postgres:" + secretPW + "@127.0.0.1:5432/test?sslmode=disable"
	const url = "mutex.orders.driver.url"
	cases := []struct {
		name, url string
		want      string // "" = works
	}{
		{"lower case", "postgres://" + rest, ""},
		{"upper case", "POSTGRES://" + rest, ""},
		{"capitalized", "Postgres://" + rest, ""},
		{"postgresql mixed case", "PostgreSQL://" + rest, ""},
		{"misspelled", "postgress://" + rest, "scheme must be postgres or postgresql " + urlHidden},
		{"plus suffix", "postgresql+x://" + rest, "scheme must be postgres or postgresql " + urlHidden},
		{"other scheme", "mysql://" + rest, "scheme must be postgres or postgresql " + urlHidden},
		{"leading space", " postgres://" + rest, "scheme must be postgres or postgresql " + urlHidden},
		{"one slash", "postgres:/" + rest, "a parameter name is not an identifier"},
		{"no slash", "postgres:" + rest, "a parameter name is not an identifier"},
		{"key=value bad name", "host=127.0.0.1 user=postgres dbname=test sslmode=disable application-name=x", "a parameter name is not an identifier"},
		{"key=value", "host=127.0.0.1 user=postgres password=" + secretPW + " dbname=test sslmode=disable application_name=mutexfx.test", ""},
		{"key=value with ://", "host=127.0.0.1 user=postgres password=a://b dbname=test sslmode=disable", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := fromSpec(map[string]any{"url": tc.url}, nil)
			if tc.want != "" {
				if err == nil {
					closeDriver(t, d)
				}
				wantSpecError(t, err, url, tc.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			closeDriver(t, d)
			wantWorks(t, map[string]any{"url": tc.url})
		})
	}
}

// TestURLAtInPassword: pgx ends the user name and password at their first
// @, so an unescaped @ in the password made the host from the rest of it
// ("lookup 3tPW@127.0.0.1: no such host" in every error); an unescaped / in
// it ended the host part early, putting the rest in the database name.
// Both fail at the key, which asks for %40 (%2F), showing nothing.
func TestURLAtInPassword(t *testing.T) {
	const encode = "an @ in the user name or password must be percent-encoded as %40"
	cases := []struct {
		name string
		opts map[string]any
		path string // "" = works
		want string
	}{
		{"@ in password", map[string]any{"url": "postgres://u:" + atPW + "@127.0.0.1:5432/db"}, "url", encode},
		{"@ in password, test db", map[string]any{"url": "postgres://postgres:" + atPW + "@127.0.0.1:5432/test?sslmode=disable"}, "url", encode},
		{"@ in fallback host", map[string]any{"url": "postgres://u:pw@127.0.0.1," + atPW + "@h2/db"}, "url", encode},
		{"@ in query, no /", map[string]any{"url": "postgres://127.0.0.1?password=" + atPW}, "url", "an @ in a query that no / comes before must be percent-encoded as %40"},
		{"@ in query after a /", map[string]any{"url": "postgres://?host=127.0.0.1&user=postgres&dbname=test&sslmode=disable&application_name=a/b@c"}, "", ""},
		{"/ in password", map[string]any{"url": "postgres://u:5432/" + atPW + "@127.0.0.1/test"}, "url", "an @ in the database name"},
		{"key=value host", map[string]any{"url": "host=3tPW@127.0.0.1 user=u"}, "url", "the host contains an @"},
		{"key=value fallback", map[string]any{"url": "host=127.0.0.1,3tPW@h2 user=u"}, "url", "the host contains an @"},
		{"host field", map[string]any{"host": "u:" + secretPW + "@127.0.0.1"}, "host", "must not contain @"},
		{"escaped", map[string]any{"url": "postgres://postgres:S3cr%403tPW@127.0.0.1:5432/test?sslmode=disable&application_name=a%40b"}, "", ""},
		{"@ in query after user info", map[string]any{"url": "postgres://postgres:S3cr@127.0.0.1?hunter2part=1@otherhost/test"}, "url",
			"an @ in the query after a user name and password must be percent-encoded as %40"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := fromSpec(tc.opts, nil)
			if tc.path != "" {
				if err == nil {
					closeDriver(t, d)
				}
				wantSpecError(t, err, "mutex.orders.driver."+tc.path, tc.want)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			closeDriver(t, d)
			wantWorks(t, tc.opts)
		})
	}
}

// TestParseErrorsWithheld: pgx's parse errors quote the connection string,
// masking only the passwords it recognizes; the driver gives only the kind
// of error.
func TestParseErrorsWithheld(t *testing.T) {
	cases := []struct{ url, want string }{
		{"host=127.0.0.1 password=S3cr 3tPW port=1", "syntax error"},
		{"host=127.0.0.1 password='" + secretPW, "syntax error"},
		{"postgres://u@127.0.0.1/db?PASSWORD=" + secretPW + "&sslmode=bogus", "invalid sslmode"},
		{"postgres://u:" + secretPW + "@127.0.0.1:notaport/db", "invalid port"},
		{"host=h port=x password='S3cr 3tPW'", "invalid port"},
		{"postgres://u:S3cr 3tPW@127.0.0.1/db", "a space must be percent-encoded as %20"},
		{"postgres://u:S3cr%G3tPW@127.0.0.1/db", "invalid percent-encoding"},
		{"postgres://u:S3cr%003tPW@127.0.0.1/db", "%00 is not allowed"},
		{"postgres://u:" + secretPW + "@[::1/db", "invalid IPv6 host"},
		{"postgres://u:" + secretPW + "@127.0.0.1/db?sslmode", "syntax error"},
		{"postgres://u:" + secretPW + "@127.0.0.1/db?target_session_attrs=S3cr3tPW", "invalid target_session_attrs"},
		{"postgres://u:" + secretPW + "@h1,h2/db?port=1,2,3", "the numbers of hosts and ports differ"},
		{"postgres://u:" + secretPW + "@127.0.0.1/db?connect_timeout=S3cr3tPW", "invalid connect_timeout"},
		{"postgres://u:" + secretPW + "@127.0.0.1/db?pool_max_conns=S3cr3tPW", "invalid pool_max_conns"},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			d, err := fromSpec(map[string]any{"url": tc.url}, nil)
			if err == nil {
				closeDriver(t, d)
			}
			wantSpecError(t, err, "mutex.orders.driver.url", tc.want+" "+urlHidden)
		})
	}
}

// TestShortPasswordNotMasked: masking each occurrence of a short password
// in a parser's message showed where it matched ("cannot parxxxxxe"); no
// message quoting the input is given any more, so nothing is masked.
func TestShortPasswordNotMasked(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		key  string
		want string
	}{
		{"url", Options{URL: "postgres://u:s@127.0.0.1:notaport/db"}, "url", "invalid port"},
		{"key=value", Options{URL: "host=127.0.0.1 port=x password=e"}, "url", "invalid port"},
		{"field", Options{Password: "s", Host: "127.0.0.1", SSLMode: "bogus"}, "sslMode", "must be disable, allow, prefer"},
		{"field with url", Options{Password: "a", URL: "postgres://u@127.0.0.1:notaport/db"}, "url", "invalid port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			key, msg, ok := invalidAt(err)
			if !ok || key != tc.key || !strings.HasPrefix(msg, tc.want) || strings.Contains(err.Error(), "xxxxx") {
				t.Fatalf("New = %q; want %s: %s…, nothing masked", err, tc.key, tc.want)
			}
		})
	}
}

// TestEnvParseError: without url, what fails to parse comes from the PG*
// environment variables, and the error is at the driver block; with url,
// at the url key. Neither shows the value.
func TestEnvParseError(t *testing.T) {
	t.Setenv("PGTARGETSESSIONATTRS", secretPW)
	cases := []struct {
		name    string
		options map[string]any
		path    string
		msg     string
	}{
		{"no url", nil, "mutex.orders.driver", "invalid target_session_attrs (in the PG* environment variables or the service file)"},
		{"url", map[string]any{"url": "postgres://127.0.0.1/test"}, "mutex.orders.driver.url", "invalid target_session_attrs " + urlHidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := fromSpec(tc.options, nil)
			if err == nil {
				closeDriver(t, d)
			}
			wantSpecError(t, err, tc.path, tc.msg)
			if err.Error() != tc.path+": "+tc.msg {
				t.Fatalf("error = %q; want %q", err, tc.path+": "+tc.msg)
			}
		})
	}
}

// invalidAt returns the key path and message of an invalid option: a
// *config.Error (the factory's, at the full key path) or a
// *drivers.OptionsError (New's, at the option's key); ok is false when err
// is neither or does not match ErrOptions.
func invalidAt(err error) (path, msg string, ok bool) {
	var (
		ce *config.Error
		oe *drivers.OptionsError
	)
	switch {
	case !errors.Is(err, ErrOptions):
		return "", "", false
	case errors.As(err, &ce):
		return ce.Path, ce.Msg, true
	case errors.As(err, &oe):
		return oe.Key, oe.Err.Error(), true
	}
	return "", "", false
}
