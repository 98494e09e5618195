package mysql

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestShortPasswordWithheld: a go-sql-driver message that contains the
// password is withheld as a whole, never masked occurrence by occurrence
// (a password "o" would turn every o of the message into xxxxx, which shows
// the password and garbles the message).
func TestShortPasswordWithheld(t *testing.T) {
	const msg = "invalid value / unknown config name: nope"
	for _, tc := range []struct {
		name, password string
		withheld       bool
	}{
		{"no password", "", false},
		{"not in the message", "Wr0ng-Pa55word", false},
		{"one letter", "o", true},
		{"a word of the message", "config", true},
		{"query-escaped", "unknown config", true}, // "unknown+config" is not in msg, "unknown config" is
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := scrubPassword(msg, "tls: invalid", tc.password)
			if strings.Contains(got, "xxxxx") {
				t.Fatalf("scrubPassword = %q: masked", got)
			}
			if tc.withheld != (got != msg) {
				t.Fatalf("scrubPassword = %q; withheld %v, want %v", got, got != msg, tc.withheld)
			}
			if tc.withheld && (!strings.HasPrefix(got, "tls: invalid") || !strings.Contains(got, "withheld")) {
				t.Fatalf("scrubPassword = %q; want what failed and that the message is withheld", got)
			}
		})
	}
	if got := scrubPassword("a+b here", "x", "a b"); got == "a+b here" {
		t.Errorf("a query-escaped password is not withheld: %q", got)
	}
	// through New: a one-letter password found in the tls message
	_, err := New(Options{TLS: "nope", Password: "o"})
	if err == nil || strings.Contains(err.Error(), "xxxxx") || !strings.Contains(err.Error(), "tls") {
		t.Fatalf("New with tls nope, password o: %v; want a readable tls error", err)
	}
}

// TestOptionsPrintNoSecret: Options printed with any verb that reaches Format, JSON-encoded or
// logged through zap (Any, Reflect, as a field of another struct) show
// that a password or DSN is set, never the password.
func TestOptionsPrintNoSecret(t *testing.T) {
	const secret = "S3cr3tPW"
	type wrapper struct{ Opts Options }
	for _, tc := range []struct {
		o    Options
		show string // what printing must still show, besides xxxxx
	}{
		{Options{Password: secret, Host: "db.example", Username: "app"}, "db.example"},
		{Options{DSN: "app:" + secret + "@tcp(db.example:3306)/x"}, "@tcp(db.example:3306)/x"},
		{Options{DSN: "app:" + secret + "@tcp(db.example:3306)/x?x=a@b"}, "app:xxxxx@b"},     // up to the last @: hides more
		{Options{DSN: "app:" + secret + "/x@tcp(db.example:3306)"}, "@tcp(db.example:3306)"}, // invalid, still not shown
		{Options{DSN: "app:" + secret + "/tcp(db.example:3306)"}, "DSN:xxxxx"},               // no @, invalid: hidden whole
		{Options{DSN: "tcp(db.example:3306)/x", Password: ""}, "tcp(db.example:3306)/x"},     // no password: shown
	} {
		o := tc.o
		printed := testutil.Printed(map[string]any{"mysql.Options": o, "*mysql.Options": &o, "mysql.wrapper": wrapper{o}})
		for how, s := range printed {
			if strings.Contains(s, secret) || strings.Contains(s, hex.EncodeToString([]byte(secret))) {
				t.Errorf("%s shows the password: %s", how, s)
			}
			if show := strings.ReplaceAll(tc.show, "DSN:", dsnField(how)); !strings.HasSuffix(how, "%x") && !strings.Contains(s, show) {
				t.Errorf("%s does not show %q: %s", how, show, s)
			}
		}
	}
	if s := fmt.Sprintf("%#v", Options{Password: "p"}); !strings.HasPrefix(s, "mysql.Options{") || !strings.Contains(s, `Password:"xxxxx"`) {
		t.Errorf("%%#v = %s; want mysql.Options{...}", s)
	}
}

// TestDSNErrorHints: a DSN that does not parse is reported with what is
// wrong with it (go-sql-driver's fixed messages, or the kind of its other
// ones), never with any of it.
func TestDSNErrorHints(t *testing.T) {
	for _, pass := range []string{"S3cr3tPW", "s", "a"} { // one-letter passwords: the hint must stay readable
		for _, tc := range []struct {
			name, dsn, want string
		}{
			{"tls", "app:PASS@tcp(127.0.0.1:3306)/db?tls=bogus", "tls: unknown value or config name"},
			{"url", "mysql://app:PASS@127.0.0.1:3306/db", "a URL is not a DSN"},
			{"no slash", "app:PASS@tcp(127.0.0.1:3306)", "missing the / before the database name"},
			{"no tcp(", "app:PASS@127.0.0.1:3306/db", "no address: write the network and the address"},
			{"unclosed address", "app:PASS@tcp(127.0.0.1:3306/db", "the address's ( is not closed"},
			{"unescaped /", "app:PASS@tcp(127.0.0.1:3306)/db?x=a/b", "a / in a parameter value"},
			{"duration", "app:PASS@tcp(127.0.0.1:3306)/db?timeout=xyz", "a duration parameter"},
			{"bool", "app:PASS@tcp(127.0.0.1:3306)/db?parseTime=maybe", "a true/false parameter"},
			{"loc", "app:PASS@tcp(127.0.0.1:3306)/db?loc=Nowhere%2FLand", "loc: unknown time zone"},
			{"dbname", "app:PASS@tcp(127.0.0.1:3306)/d%zzb", "the database name has an invalid %-escape"},
			{"param escape", "app:PASS@tcp(127.0.0.1:3306)/db?foo=%zz", "a parameter value has an invalid %-escape"},
			{"packet", "app:PASS@tcp(127.0.0.1:3306)/db?maxAllowedPacket=big", "maxAllowedPacket: not an integer"},
			{"pub key", "app:PASS@tcp(127.0.0.1:3306)/db?serverPubKey=nokey", "serverPubKey: unknown key name"},
			{"strict", "app:PASS@tcp(127.0.0.1:3306)/db?strict=true", "the strict parameter was removed"}, // ParseDSN panics on it
			{"collation", "app:PASS@tcp(127.0.0.1:3306)/db?collation=big5_chinese_ci&interpolateParams=true", "collation"},
		} {
			t.Run(pass+"/"+tc.name, func(t *testing.T) {
				d, err := Factory().New(drivers.Spec{Path: "mutex.orders.driver", Options: map[string]any{"dsn": strings.ReplaceAll(tc.dsn, "PASS", pass)}, Logger: zap.NewNop()})
				if err == nil {
					d.Close(context.Background())
					t.Fatal("accepted")
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "mutex.orders.driver.dsn: invalid: ") || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "not shown") {
					t.Fatalf("error %q; want mutex.orders.driver.dsn: invalid: ...%s... (not shown...)", msg, tc.want)
				}
				if strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "xxxxx") || (len(pass) > 1 && strings.Contains(msg, pass)) {
					t.Fatalf("error %q quotes the DSN or masks it", msg)
				}
			})
		}
	}
}

// dsnField is how a printed form of Options names the DSN field.
func dsnField(how string) string {
	switch {
	case strings.HasSuffix(how, "%#v"):
		return `DSN:"`
	case strings.Contains(how, "json") || strings.Contains(how, "zap.Reflect") || strings.Contains(how, "wrapper zap.Any"):
		return `"dsn":"` // its configuration key
	}
	return "DSN:"
}

// TestDSNPanic: a panic of go-sql-driver's ParseDSN is reported as such,
// not as the strict parameter whatever it was; the strict parameter's
// panic keeps its hint. Neither shows the DSN nor the panic's value.
func TestDSNPanic(t *testing.T) {
	const dsn = "app:S3cr3tPW@tcp(127.0.0.1:3306)/db"
	for _, tc := range []struct {
		name  string
		panic any
		want  string
	}{
		{"strict", "strict mode has been removed. See https://github.com/go-sql-driver/mysql/wiki/strict-mode",
			"invalid: the strict parameter was removed from go-sql-driver/mysql"},
		{"other string", "runtime error: index out of range [3] with length 3 in " + dsn, "invalid: go-sql-driver/mysql panicked while parsing it"},
		{"error", fmt.Errorf("bad %s", dsn), "invalid: go-sql-driver/mysql panicked while parsing it"},
		{"strict-looking error", errors.New("strict mode has been removed"), "invalid: go-sql-driver/mysql panicked while parsing it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseDSNWith(func(string) (*gomysql.Config, error) { panic(tc.panic) }, dsn)
			if c != nil || err == nil {
				t.Fatalf("parseDSNWith = %v, %v; want an error", c, err)
			}
			if got := dsnProblem(dsn, err); got != tc.want {
				t.Fatalf("dsnProblem = %q; want %q", got, tc.want)
			}
			if strings.Contains(err.Error(), "S3cr3tPW") || strings.Contains(err.Error(), "127.0.0.1") {
				t.Fatalf("error %q shows the DSN", err)
			}
		})
	}
}
