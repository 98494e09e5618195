package postgres

import (
	"cmp"
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/redact"
)

// urlParts are a URL's parts after "://", split as pgx's parseURLSettings
// does: user info up to the first @ before any /; hosts up to a / or ?
// outside an IPv6 host's brackets; then "/db" and "?query". Each part but
// hosts keeps its delimiter ("u:pw@") and is "" when absent.
type urlParts struct{ userinfo, hosts, database, query string }

func splitURL(rest string) (u urlParts) {
	if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
		u.userinfo, rest = rest[:i+1], rest[i+1:]
	}
	n := 0
	for ; n < len(rest) && rest[n] != '/' && rest[n] != '?'; n++ {
		if rest[n] == '[' && (n == 0 || rest[n-1] == ',') {
			n += max(strings.IndexByte(rest[n:], ']'), 0) // (pgx refuses a [ without ])
		}
	}
	u.hosts, u.database = rest[:n], rest[n:]
	if q := strings.IndexByte(u.database, '?'); q >= 0 {
		u.database, u.query = u.database[:q], u.database[q:]
	}
	return u
}

// checkURL returns raw with a URL's scheme lower-cased (pgx reads other
// spellings as key=value), and whether raw is a URL. It refuses a URL pgx
// would split with a piece of the password outside it, where errors show it.
func checkURL(raw string) (string, bool, error) {
	i := strings.Index(raw, "://")
	if i < 0 || strings.Contains(raw[:i], "=") {
		return raw, false, nil
	}
	scheme := raw[:i]
	if !strings.EqualFold(scheme, "postgres") && !strings.EqualFold(scheme, "postgresql") {
		return "", true, urlError("scheme must be postgres or postgresql")
	}
	rest := raw[i+len("://"):]
	u := splitURL(rest)
	if q := strings.IndexByte(u.userinfo, '?'); q >= 0 && strings.Contains(u.userinfo[q:], "=") {
		return "", true, urlError("an @ in a query that no / comes before must be percent-encoded as %%40 " +
			"(pgx reads the query up to it as a user name and password); so must a ? in the user name or password, as %%3F")
	}
	if strings.Contains(u.hosts, "@") {
		return "", true, urlError("an @ in the user name or password must be percent-encoded as %%40")
	}
	if strings.Contains(u.userinfo, ":") && strings.Contains(u.query, "@") {
		// postgres://u:S3cr@h?x=1@realhost/db: the password "S3cr@h?x=1",
		// or a host "h" and a parameter "x"?
		return "", true, urlError("an @ in the query after a user name and password must be percent-encoded as %%40 " +
			"(it cannot be told from an unencoded @ in the password, which pgx would split there)")
	}
	if strings.Contains(u.database, "@") {
		return "", true, urlError("an @ in the database name must be percent-encoded as %%40; " +
			"so must a / in the user name or password, as %%2F")
	}
	if u.userinfo == "" && strings.Contains(u.query, "@") && len(ports(u.hosts)) > 0 {
		// postgres://u:1234/Wk?a=b@h/db: the host u, port 1234, database
		// Wk, parameter a, or the password "1234/Wk?a=b" with an unencoded /?
		return "", true, urlError("an @ in the query after a host with a port must be percent-encoded as %%40 " +
			"(it cannot be told from a / in the password, which must be percent-encoded as %%2F: " +
			"pgx would read the password's pieces as the port, the database name and the query)")
	}
	return strings.ToLower(scheme) + "://" + rest, true, nil
}

// ports returns the ports in a URL's hosts part (after a : outside brackets).
func ports(hosts string) []string {
	var ps []string
	for _, h := range strings.Split(hosts, ",") {
		if _, after, ok := strings.Cut(h, "]"); ok && strings.HasPrefix(h, "[") {
			h = after
		}
		if i := strings.LastIndexByte(h, ':'); i >= 0 {
			ps = append(ps, h[i+1:])
		}
	}
	return ps
}

// paramName is what a runtime parameter's name must look like.
var paramName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// checkParsed checks that pgx parsed hosts without @ and plain runtime
// parameter names.
func checkParsed(cfg *pgxpool.Config, key string) error {
	cc := cfg.ConnConfig
	hosts := cc.Host
	for _, fb := range cc.Fallbacks {
		hosts += "," + fb.Host
	}
	if strings.Contains(hosts, "@") {
		return connError(key, "the host contains an @: percent-encode an @ in the user name or password as %%40")
	}
	for name := range cc.RuntimeParams {
		if !paramName.MatchString(name) {
			return connError(key, "a parameter name is not an identifier ([A-Za-z_][A-Za-z0-9_.]*); "+
				"a URL must start with postgres:// or postgresql://")
		}
	}
	return nil
}

// parseError describes a pgxpool.ParseConfig error by kind alone: its
// message quotes the connection string.
func parseError(err error, key string) error {
	msg := err.Error()
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		// match pgx's own words only, not the (redacted) string it quotes
		msg = strings.TrimPrefix(msg, pgconn.NewParseConfigError(pe.ConnString, "", nil).Error())
	}
	for _, p := range parseProblems {
		if strings.Contains(msg, p.phrase) {
			return connError(key, "%s", p.kind)
		}
	}
	for _, name := range parseParams {
		if strings.Contains(msg, name) {
			return connError(key, "invalid %s", name)
		}
	}
	return connError(key, "invalid")
}

// parseProblems map a phrase of pgx's parse errors to their kind (first match).
var parseProblems = []struct{ phrase, kind string }{
	{"IPv6 host address", "invalid IPv6 host"},
	{"unexpected spaces", "a space must be percent-encoded as %20"},
	{"percent-encoded token", "invalid percent-encoding"},
	{"forbidden value %00", "%00 is not allowed"},
	{"NUL byte", "NUL byte"},
	{"failed to parse as", "syntax error"},
	{"invalid port", "invalid port"},
	{"port numbers to", "the numbers of hosts and ports differ"},
	{"sslmode is invalid", "invalid sslmode"},
	{"sslcertmode", "invalid sslcertmode"},
	{`"sslcert" and "sslkey"`, "sslcert and sslkey must be set together"},
	{"failed to configure TLS", "the TLS settings (sslrootcert, sslcert, sslkey, sslpassword) could not be used"},
	{"cannot be greater than max_protocol_version", "min_protocol_version is greater than max_protocol_version"},
	{"failed to read service", "the service could not be read"},
}

// parseParams are the parameters pgx's parse errors name, a name before
// any shorter one it starts with.
var parseParams = []string{"connect_timeout", "target_session_attrs", "min_protocol_version", "max_protocol_version",
	"channel_binding", "require_auth", "statement_cache_capacity", "description_cache_capacity", "default_query_exec_mode",
	"pool_max_conn_lifetime_jitter", "pool_max_conn_lifetime", "pool_max_conn_idle_time", "pool_max_conns",
	"pool_min_idle_conns", "pool_min_conns", "pool_health_check_period", "pool_ping_timeout"}

// connKeys are the query parameters pgx reads itself (not runtime ones).
var connKeys = append([]string{"host", "port", "dbname", "database", "user", "password", "passfile", "sslmode", "sslkey",
	"sslcert", "sslcertmode", "sslrootcert", "sslnegotiation", "sslpassword", "sslsni", "krbspn", "krbsrvname", "service", "servicefile"},
	parseParams...)

// connError is an error about the connection string at key ("url", or ""
// for the PG* variables and service file). It never quotes the string.
func connError(key, format string, args ...any) error {
	if key == "" {
		return drivers.OptionErrorf("", format+" (in the PG* environment variables or the service file)", args...)
	}
	return drivers.OptionErrorf(key, format+" (the URL is not shown: it may hold a password)", args...)
}

func urlError(format string) error { return connError("url", format) }

// redactURL returns an accepted URL with its passwords (the user's, and
// parameters named with "pass", "secret" or "token") as xxxxx, else "(not shown)".
func redactURL(raw string) string {
	const hidden = "(not shown)"
	norm, isURL, err := checkURL(raw)
	if !isURL || err != nil {
		return hidden
	}
	scheme, rest, _ := strings.Cut(norm, "://")
	u := splitURL(rest)
	if strings.Count(u.hosts, "[") != strings.Count(u.hosts, "]") {
		return hidden // pgx refuses it: which part is the password is unclear
	}
	for _, p := range ports(u.hosts) { // each empty, or one pgx reads (1 to 65535)
		if n, err := strconv.ParseUint(p, 10, 16); p != "" && (err != nil || n == 0) {
			return hidden
		}
	}
	if user, pw, _ := strings.Cut(strings.TrimSuffix(u.userinfo, "@"), ":"); pw != "" {
		u.userinfo = user + ":" + redact.Mask + "@"
	}
	if u.query != "" {
		pairs, afterPW := strings.Split(u.query[1:], "&"), false
		for i, pair := range pairs {
			k, v, ok := strings.Cut(pair, "=")
			name, err := url.PathUnescape(k)
			if !ok || strings.Contains(v, "=") || err != nil {
				return hidden // pgx refuses it: which part is secret is unclear
			}
			name = strings.ToLower(strings.Trim(name, " "))
			switch {
			case strings.Contains(name, "pass") || strings.Contains(name, "secret") || strings.Contains(name, "token"):
				pairs[i], afterPW = k+"="+redact.Mask, true
			case afterPW && !slices.Contains(connKeys, name):
				// a runtime parameter, or the rest of a password after an &
				pairs[i] = redact.Mask + "=" + redact.Mask
			}
		}
		u.query = "?" + strings.Join(pairs, "&")
	}
	return scheme + "://" + u.userinfo + u.hosts + u.database + u.query
}

// hideRefusedParams wraps next, the PgError handler, to replace the text of
// a FATAL startup error refusing a runtime parameter (refusesParam): it
// quotes a name or value that may be a piece of a misparsed password. The
// SQLSTATE stays.
func hideRefusedParams(next pgconn.PgErrorHandler, key string, params map[string]string) pgconn.PgErrorHandler {
	where := cmp.Or(key, "the PG* environment variables or the service file")
	return func(c *pgconn.PgConn, pe *pgconn.PgError) bool {
		if c.PID() == 0 && refusesParam(pe, params) {
			what := cmp.Or(map[string]string{"42704": "unrecognized", "22023": "invalid value",
				"55P02": "cannot be set at connection start"}[pe.Code], "refused")
			*pe = pgconn.PgError{Severity: pe.Severity, SeverityUnlocalized: pe.SeverityUnlocalized, Code: pe.Code,
				Message: where + ": the server refused a runtime parameter of the connection string (" + what +
					"); its name and value are not shown, as they may be pieces of a password: quote a key=value password " +
					`holding a space or ' in single quotes (escaping ' and \ as \' and \\), ` +
					"and percent-encode an & in a URL's password as %26"}
			// closed here: had next (pgx's) kept the connection, pgconn
			// would rebuild the error from the raw message
			next(c, pe)
			return false
		}
		return next(c, pe)
	}
}

// refusesParam reports whether pe is a FATAL error refusing a parameter of
// params: by its code (42704, 22023, 55P02), or an 08P01 or 42501 naming
// one (PgBouncer: "unsupported startup parameter: x").
func refusesParam(pe *pgconn.PgError, params map[string]string) bool {
	if !strings.EqualFold(cmp.Or(pe.SeverityUnlocalized, pe.Severity), "FATAL") {
		return false
	}
	if slices.Contains([]string{"42704", "22023", "55P02"}, pe.Code) {
		return true
	}
	// by name only where the code says so: a role or database error
	// naming a word that is also a parameter's name keeps its text
	if !slices.Contains([]string{"08P01", "42501"}, pe.Code) {
		return false
	}
	text := strings.ToLower(pe.Message + " " + pe.Detail + " " + pe.Hint)
	for name := range params {
		// the name as a whole word: not within a longer name
		word := `(^|[^a-z0-9_.])` + regexp.QuoteMeta(strings.ToLower(name)) + `($|[^a-z0-9_.]|\.$|\.[^a-z0-9_])`
		if regexp.MustCompile(word).MatchString(text) {
			return true
		}
	}
	return false
}
