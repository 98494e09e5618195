package mysql

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/internal/redact"
)

// plainOptions is Options without methods: printed, it does not call back.
type plainOptions Options

// printed is the options as they print: passwords (own and the DSN's) as
// xxxxx.
func (o Options) printed() redact.Value {
	o.Password = redact.Secret(o.Password)
	o.DSN = redactDSN(o.DSN)
	return redact.Value{Name: "mysql.Options", Plain: plainOptions(o)}
}

// String describes the options, passwords (own and the DSN's) as xxxxx.
func (o Options) String() string { return o.printed().String() }

// GoString is String in Go syntax, for %#v.
func (o Options) GoString() string { return o.printed().GoString() }

// Format prints the options as String does (GoString for %#v): see
// redact.Format for the verbs fmt does not pass to it.
func (o Options) Format(f fmt.State, verb rune) { o.printed().Format(f, verb) }

// MarshalJSON encodes the options, secrets redacted as in String.
func (o Options) MarshalJSON() ([]byte, error) { return o.printed().MarshalJSON() }

// redactDSN replaces a DSN's password, between the first : and the last @
// (go-sql-driver's is before the last /: this hides more), with xxxxx. A
// malformed DSN without an @ is hidden whole.
func redactDSN(dsn string) string {
	if dsn == "" {
		return ""
	}
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		if _, err := parseDSN(dsn); err != nil {
			return redact.Mask
		}
		return dsn
	}
	user, _, ok := strings.Cut(dsn[:at], ":")
	if !ok {
		return dsn
	}
	return user + ":" + redact.Mask + dsn[at:]
}

// scrubPassword returns msg, or, when it holds the password
// (redact.Quotes), what failed and a note that it is withheld.
func scrubPassword(msg, what, password string) string {
	if redact.Quotes(msg, password) {
		return what + " (go-sql-driver's message is withheld: it contains the password)"
	}
	return msg
}

// parseDSN is gomysql.ParseDSN, with a panic (on a strict parameter, or
// else) returned as an error showing neither the DSN nor the panic's value.
func parseDSN(dsn string) (c *gomysql.Config, err error) { return parseDSNWith(gomysql.ParseDSN, dsn) }

func parseDSNWith(parse func(string) (*gomysql.Config, error), dsn string) (c *gomysql.Config, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, err = nil, errPanicked
			if s, ok := r.(string); ok && strings.HasPrefix(s, strictPanic) {
				err = errStrict
			}
		}
	}()
	return parse(dsn)
}

// strictPanic starts go-sql-driver's panic on a strict parameter.
const strictPanic = "strict mode has been removed"

// The errors of a DSN on which go-sql-driver panicked.
var (
	errStrict   = errors.New(strictPanic)
	errPanicked = errors.New("go-sql-driver/mysql panicked while parsing the DSN")
)

const (
	// unknownTLS starts go-sql-driver's message of an unknown tls value.
	unknownTLS = "invalid value / unknown config name: "
	tlsHint    = "tls: unknown value or config name (true, false, skip-verify, preferred, or a name registered with " +
		"mysql.RegisterTLSConfig)"
	durationHint = "a duration parameter (timeout, readTimeout, writeTimeout, timeTruncate) is not a Go duration such as 5s"
)

// dsnHints map go-sql-driver's DSN parse errors (v1.10), by their fixed
// beginning (the rest may quote the password), to what is said of them.
var dsnHints = []struct{ prefix, hint string }{
	{"invalid DSN: missing the slash separating the database name", "missing the / before the database name: " +
		"user:password@tcp(host:3306)/dbname (the name may be empty)"},
	{"invalid DSN: network address not terminated (missing closing brace)", "the address's ( is not closed: tcp(host:3306)"},
	{"invalid DSN: did you forget to escape a param value?", "a / in a parameter value (or after the address's ')'): percent-encode it as %2F"},
	{"invalid DSN: interpolateParams can not be used with unsafe collations", "interpolateParams cannot be used with this collation"},
	{"default addr for network '", "no address: write the network and the address in parentheses after the @, " +
		"tcp(host:3306) or unix(/path/to/socket)"},
	{unknownTLS, tlsHint},
	{"invalid value for TLS config name: ", "tls: the value has an invalid %-escape"},
	{"invalid value / unknown server pub key name: ", "serverPubKey: unknown key name (register it with mysql.RegisterServerPubKey)"},
	{"invalid value for server pub key name: ", "serverPubKey: the value has an invalid %-escape"},
	{"invalid connectionAttributes value: ", "connectionAttributes: the value has an invalid %-escape"},
	{"invalid bool value: ", "a true/false parameter has another value"},
	{"invalid timeTruncate value: ", durationHint},
	{"invalid dbname ", "the database name has an invalid %-escape"},
	{"invalid URL escape ", "a parameter value has an invalid %-escape"},
	{"unknown time zone ", "loc: unknown time zone"},
	{"time: invalid location name", "loc: invalid time zone name"},
	{"time: ", durationHint},
	{"strconv.Atoi: ", "maxAllowedPacket: not an integer"},
	{errStrict.Error(), "the strict parameter was removed from go-sql-driver/mysql"},
	{errPanicked.Error(), "go-sql-driver/mysql panicked while parsing it"},
}

var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// dsnProblem says what is wrong with a DSN that go-sql-driver could not
// parse, quoting none of it.
func dsnProblem(dsn string, err error) string {
	if urlScheme.MatchString(dsn) {
		return "invalid: a URL is not a DSN: write user:password@tcp(host:3306)/dbname?param=value"
	}
	for _, h := range dsnHints {
		if strings.HasPrefix(err.Error(), h.prefix) {
			return "invalid: " + h.hint
		}
	}
	return "invalid"
}
