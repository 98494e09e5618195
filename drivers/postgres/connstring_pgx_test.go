package postgres

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// What a refused connection string is refused for (connstring tests).
const (
	leaks     = "leaks"     // pgx parses it with a piece of the password outside the password
	pgxFails  = "pgx fails" // pgx refuses it too
	misread   = "misread"   // pgx parses it, not as written: its user name is a query
	ambiguous = "ambiguous" // pgx parses it right, but it reads like a form that leaks
)

// TestURLChecksMatchPgx compares the driver's checks (checkURL, then
// checkParsed after pgxpool.ParseConfig) with pgxpool.ParseConfig itself
// (pgx v5.13, which splits a URL as libpq does: the user name and password
// end at the first @ that comes before any /, even one in the query; the
// hosts end at the first / or ?). A string the driver accepts parses in pgx
// to the user, password, host and database written, and no piece of the
// password lands anywhere else; a string it refuses leaks in pgx, or is
// refused or misread by pgx, or reads exactly like a form that leaks. Before,
// checkURL took everything after the first / as the database name, so that
// a / in the query (host=/tmp) made an @ after it "an @ in the database
// name", and refused any URL with two @ before its first /.
func TestURLChecksMatchPgx(t *testing.T) {
	const (
		pw    = secretPW
		atPW  = "S3cr@3tPW"
		any   = "-" // not compared: pgx's default (environment, OS user)
		encAt = "an @ in the user name or password must be percent-encoded as %40"
		inDB  = "an @ in the database name must be percent-encoded as %40"
		query = "an @ in a query that no / comes before must be percent-encoded as %40"
		// an @ in the query after user info
		afterUser = "an @ in the query after a user name and password must be percent-encoded as %40"
		// an @ in the query after a port, no user info
		afterPort = "an @ in the query after a host with a port must be percent-encoded as %40"
	)
	cases := []struct {
		url                string
		user, pw, host, db string // accepted: what pgx parses
		refused, why       string // refused: the message's beginning, and why
	}{
		// accepted
		{url: "postgres://u:" + pw + "@h:5432/db", user: "u", pw: pw, host: "h", db: "db"},
		{url: "postgresql://u:" + pw + "@h/db?sslmode=disable", user: "u", pw: pw, host: "h", db: "db"},
		{url: "POSTGRES://u:" + pw + "@h/db", user: "u", pw: pw, host: "h", db: "db"},
		{url: "postgres://h1:5432,h2:5433/db", user: any, host: "h1", db: "db"},
		{url: "postgres://u:" + pw + "@h1:5432,h2:5432/db", user: "u", pw: pw, host: "h1", db: "db"},
		{url: "postgresql:///db?host=/tmp", user: any, host: "/tmp", db: "db"},
		{url: "postgres://[::1]:5432/db", user: any, host: "::1", db: "db"},
		{url: "postgres://u:" + pw + "@[::1]/db", user: "u", pw: pw, host: "::1", db: "db"},
		{url: "postgres://u%40x:S3cr%403tPW@h/db", user: "u@x", pw: atPW, host: "h", db: "db"},
		{url: "postgres://u:S3cr%2F3tPW@h/db", user: "u", pw: "S3cr/3tPW", host: "h", db: "db"},
		{url: "postgres://u:S3cr:3tPW@h/db", user: "u", pw: "S3cr:3tPW", host: "h", db: "db"},
		{url: "postgres://u:S3cr?3tPW@h/db", user: "u", pw: "S3cr?3tPW", host: "h", db: "db"},
		{url: "postgres://:" + pw + "@h/db", user: any, pw: pw, host: "h", db: "db"},
		{url: "postgres://u:" + pw + "@/db?host=/tmp", user: "u", pw: pw, host: "/tmp", db: "db"},
		{url: "postgres://?host=/tmp&user=a@b", user: "a@b", host: "/tmp", db: any},
		{url: "postgres://?host=/tmp&password=" + atPW, user: any, pw: atPW, host: "/tmp", db: any},
		{url: "postgres://?host=/tmp&user=u&password=" + atPW + "&dbname=db", user: "u", pw: atPW, host: "/tmp", db: "db"},
		{url: "postgres://u:" + pw + "@h/db?application_name=a%40b", user: "u", pw: pw, host: "h", db: "db"},
		{url: "postgres://alice@h/db?krbspn=postgres/h@EXAMPLE.COM", user: "alice", host: "h", db: "db"}, // no password: nothing to split
		{url: "postgres://h/db?password=" + atPW, user: any, pw: atPW, host: "h", db: "db"},
		{url: "postgres://[::1]/db?password=" + atPW, user: any, pw: atPW, host: "::1", db: "db"},
		{url: "postgres://alice@h:5432/db?application_name=a@b", user: "alice", host: "h", db: "db"},
		{url: "postgres://us?er@h/db", user: "us?er", host: "h", db: "db"},
		{url: "postgres://h?sslmode=disable", user: any, host: "h", db: any},
		{url: "host=h user=a@b password=" + atPW + " dbname=db", user: "a@b", pw: atPW, host: "h", db: "db"},
		{url: "host=/tmp dbname=test", user: any, host: "/tmp", db: "test"},
		{url: "host=h password=a://" + pw, user: any, pw: "a://" + pw, host: "h", db: any},
		// refused
		{url: "postgres://u:" + atPW + "@h/db", refused: encAt, why: leaks},
		{url: "postgres://u:" + atPW + "@h", refused: encAt, why: leaks},
		{url: "postgres://u:" + atPW + "@h?sslmode=disable", refused: encAt, why: leaks},
		{url: "postgres://u:" + atPW + "@h:5432/db", refused: encAt, why: leaks},
		{url: "postgres://u:pw@h1," + atPW + "@h2/db", refused: encAt, why: leaks},
		{url: "postgres://h1," + atPW + "@h2/db", refused: encAt, why: leaks},
		{url: "postgres://u:" + atPW + "@[::1]/db", refused: encAt, why: pgxFails},
		{url: "postgres://u:5432/" + atPW + "@h/db", refused: inDB, why: leaks},
		{url: "postgres://u:S3cr/3tPW@h/db", refused: inDB, why: pgxFails},
		{url: "postgres://u:pw@h/S3cr@3tPW/db", refused: inDB, why: leaks},
		{url: "postgres://h?password=" + atPW, refused: query, why: leaks},
		{url: "postgres://h:5432?password=" + atPW, refused: query, why: leaks},
		{url: "postgres://?password=" + atPW + "&host=/tmp", refused: query, why: leaks},
		{url: "postgres://?user=a@b", refused: query, why: misread},
		{url: "postgres://u:S3cr?a=3tPW@h/db", refused: query, why: ambiguous},
		{url: "postgres://u:" + pw + "@h?application_name=a@b", refused: afterUser, why: ambiguous},
		{url: "postgres://u:" + pw + "@h/db?application_name=a@b", refused: afterUser, why: ambiguous},
		{url: "postgres://u:S3cr@h?x=1@realhost/db", refused: afterUser, why: ambiguous}, // the password "S3cr@h?x=1"?
		{url: "postgres://u:S3cr@h/db?x=1@realhost", refused: afterUser, why: ambiguous}, // the password "S3cr@h/db?x=1"?
		{url: "postgres://u:1234/S3cr?a=3tPW@h/db", refused: afterPort, why: leaks},
		{url: "postgres://u:5432/?S3cr=3tPW@h", refused: afterPort, why: leaks},
		{url: "postgres://u:S3cr/3tPW?a=b@h/db", refused: afterPort, why: pgxFails},
		{url: "postgres://h:5432/db?password=" + atPW, refused: afterPort, why: ambiguous}, // the password "5432/db?password=S3cr"?
		{url: "postgress://u:" + pw + "@h/db", refused: "scheme must be postgres or postgresql", why: pgxFails},
		{url: "host=S3cr@3tPW user=u", refused: "the host contains an @", why: leaks},
		{url: "host=h1,S3cr@3tPW user=u", refused: "the host contains an @", why: leaks},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			_, err := Options{URL: tc.url}.poolConfig()
			norm := tc.url
			if i := strings.Index(norm, "://"); i >= 0 && !strings.Contains(norm[:i], "=") {
				norm = strings.ToLower(norm[:i]) + norm[i:]
			}
			cfg, pgxErr := pgxpool.ParseConfig(norm)
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v; pgx parses it (error %v)", err, pgxErr)
				}
				cc := cfg.ConnConfig
				for _, f := range []struct{ name, got, want string }{
					{"user", cc.User, tc.user}, {"password", cc.Password, tc.pw}, {"host", cc.Host, tc.host}, {"database", cc.Database, tc.db},
				} {
					if f.want != any && f.got != f.want {
						t.Errorf("pgx parses the %s as %q; want %q", f.name, f.got, f.want)
					}
				}
				if where := leak(cfg); where != "" {
					t.Errorf("accepted, and pgx puts a piece of the password in the %s", where)
				}
				wantRedacted(t, tc.url, cfg)
				return
			}
			if key, msg, ok := invalidAt(err); !ok || key != "url" || !strings.HasPrefix(msg, tc.refused) {
				t.Fatalf("error = %v; want url: %s…", err, tc.refused)
			}
			if strings.Contains(err.Error(), tc.url) || strings.Contains(err.Error(), "S3cr") || strings.Contains(err.Error(), "3tPW") {
				t.Fatalf("error %q shows the URL or a piece of the password", err)
			}
			switch where := ""; tc.why {
			case leaks:
				if pgxErr == nil {
					where = leak(cfg)
				}
				if where == "" {
					t.Errorf("refused as leaking, but pgx parses it to %+v (error %v)", cfg.ConnConfig.Config, pgxErr)
				}
			case pgxFails:
				if pgxErr == nil {
					t.Errorf("refused as invalid, but pgx parses it")
				}
			case misread:
				if pgxErr != nil || !strings.Contains(cfg.ConnConfig.User, "?") {
					t.Errorf("refused as misread, but pgx parses its user as %q (error %v)", cfg.ConnConfig.User, pgxErr)
				}
			case ambiguous:
				if pgxErr != nil || leak(cfg) != "" {
					t.Errorf("refused as ambiguous, but pgx leaks it or fails (%v)", pgxErr)
				}
			}
		})
	}
}

// leak names where pgx put a piece of the password other than in the
// password: the user name, a host, the database or a runtime parameter.
func leak(cfg *pgxpool.Config) string {
	cc := cfg.ConnConfig
	fields := map[string]string{"user name": cc.User, "host": cc.Host, "database": cc.Database}
	for _, fb := range cc.Fallbacks {
		fields["host"] += "," + fb.Host
	}
	for k, v := range cc.RuntimeParams {
		fields["runtime parameters"] += k + "=" + v + " "
	}
	for name, v := range fields {
		if strings.Contains(v, "S3cr") || strings.Contains(v, "3tPW") {
			return name
		}
	}
	return ""
}

// wantRedacted checks that the printed form of an accepted URL (redactURL)
// shows no piece of the password, and that pgx parses it as it parses the
// URL (cfg), with the password as xxxxx; a key=value string is not shown.
func wantRedacted(t *testing.T, raw string, cfg *pgxpool.Config) {
	t.Helper()
	r := redactURL(raw)
	if strings.Contains(r, "S3cr") || strings.Contains(r, "3tPW") {
		t.Fatalf("redactURL = %s: shows a piece of the password", r)
	}
	if _, isURL, _ := checkURL(raw); !isURL {
		if r != "(not shown)" {
			t.Fatalf("redactURL of a key=value string = %s; want (not shown)", r)
		}
		return
	}
	rc, err := pgxpool.ParseConfig(r)
	if err != nil {
		t.Fatalf("redactURL = %s: pgx cannot parse it: %v", r, err)
	}
	a, b := cfg.ConnConfig, rc.ConnConfig
	if a.User != b.User || a.Host != b.Host || a.Port != b.Port || a.Database != b.Database || len(a.Fallbacks) != len(b.Fallbacks) ||
		(a.Password != "") != (b.Password == "xxxxx") {
		t.Fatalf("redactURL = %s parses to user %q, host %q:%d, database %q, password %q; the URL to %q, %q:%d, %q",
			r, b.User, b.Host, b.Port, b.Database, b.Password, a.User, a.Host, a.Port, a.Database)
	}
}
