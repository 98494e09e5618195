package postgres

import (
	"errors"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// notShown ends the errors about the connection string: it is never
// quoted, nor any part of it, since which part is the password depends on
// how a parser split it.
const notShown = "(the URL is not shown: it may hold a password)"

// Connection string checks. pgx reads a string as a URL only when it starts
// with "postgres://" or "postgresql://" in lower case, and as key=value
// otherwise: a mistyped URL became one startup parameter whose name, the
// whole URL, the server's error quoted. In a URL, pgx ends the user name
// and password at their first @ and the host part at the first / or ?
// after it: an unescaped @ or / in the password put the rest of it in the
// host or the database name, which connection errors show.

// checkURL returns raw with the scheme of a URL lower-cased, and whether
// raw is a URL: it has "://" with no "=" before it (a key=value string
// starts with a key and "="). Its errors name the url key.
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
	// pgx looks for the @ that ends the user name and password up to the
	// first /, even past a ?.
	authority, path, _ := strings.Cut(rest, "/")
	if strings.Count(authority, "@") > 1 {
		return "", true, urlError("an @ in the user name or password must be percent-encoded as %%40; " +
			"so must an @ in the query of a URL without a /database part")
	}
	if at := strings.IndexByte(authority, '@'); at >= 0 {
		// a user name with a ? is a query that pgx read as the user name
		// and password: its @ ended them, the host comes after it
		if user, _, _ := strings.Cut(authority[:at], ":"); strings.Contains(user, "?") {
			return "", true, urlError("an @ in the query of a URL without a /database part must be percent-encoded as %%40")
		}
	}
	path, _, _ = strings.Cut(path, "?")
	if strings.Contains(path, "@") {
		return "", true, urlError("an @ in the database name must be percent-encoded as %%40; " +
			"so must a / in the user name or password, as %%2F")
	}
	return strings.ToLower(scheme) + "://" + rest, true, nil
}

// paramName is what a runtime parameter's name must look like.
var paramName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// checkParsed checks what pgx parsed out of the connection string: the
// hosts have no @ and the runtime parameters (the keys pgx does not know,
// sent to the server at startup) are plain names.
func checkParsed(cfg *pgxpool.Config, key string) error {
	cc := cfg.ConnConfig
	hosts := []string{cc.Host}
	for _, fb := range cc.Fallbacks {
		hosts = append(hosts, fb.Host)
	}
	for _, h := range hosts {
		if strings.Contains(h, "@") {
			return connError(key, "the host contains an @: percent-encode an @ in the user name or password as %%40")
		}
	}
	for name := range cc.RuntimeParams {
		if !paramName.MatchString(name) {
			return connError(key, "a parameter name is not an identifier ([A-Za-z_][A-Za-z0-9_.]*); "+
				"a URL must start with postgres:// or postgresql://")
		}
	}
	return nil
}

// parseError describes an error of pgxpool.ParseConfig by its kind alone:
// its message quotes the connection string, masking only the passwords
// pgx recognizes, and may quote pieces of it.
func parseError(err error, key string) error {
	msg := err.Error()
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		// match pgx's own words only, not the (redacted) string it quotes
		msg = strings.TrimPrefix(msg, pgconn.NewParseConfigError(pe.ConnString, "", nil).Error())
	}
	kind := "invalid"
	for _, p := range parseProblems {
		if strings.Contains(msg, p.phrase) {
			kind = p.kind
			break
		}
	}
	return connError(key, "%s", kind)
}

// parseProblems are the kinds of pgx's parse errors, by a phrase of the
// message; the first that matches applies.
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
	{"connect_timeout", "invalid connect_timeout"},
	{"target_session_attrs", "invalid target_session_attrs"},
	{"cannot be greater than max_protocol_version", "min_protocol_version is greater than max_protocol_version"},
	{"min_protocol_version", "invalid min_protocol_version"},
	{"max_protocol_version", "invalid max_protocol_version"},
	{"channel_binding", "invalid channel_binding"},
	{"require_auth", "invalid require_auth"},
	{"failed to read service", "the service could not be read"},
	{"statement_cache_capacity", "invalid statement_cache_capacity"},
	{"description_cache_capacity", "invalid description_cache_capacity"},
	{"default_query_exec_mode", "invalid default_query_exec_mode"},
	{"pool_max_conn_lifetime_jitter", "invalid pool_max_conn_lifetime_jitter"},
	{"pool_max_conn_lifetime", "invalid pool_max_conn_lifetime"},
	{"pool_max_conn_idle_time", "invalid pool_max_conn_idle_time"},
	{"pool_max_conns", "invalid pool_max_conns"},
	{"pool_min_idle_conns", "invalid pool_min_idle_conns"},
	{"pool_min_conns", "invalid pool_min_conns"},
	{"pool_health_check_period", "invalid pool_health_check_period"},
	{"pool_ping_timeout", "invalid pool_ping_timeout"},
}

// connError is an error about the connection string at key: "url", or ""
// (the driver block) when only the PG* environment variables and the
// service file were parsed.
func connError(key, format string, args ...any) error {
	if key == "" {
		return newOptionError("", format+" (in the PG* environment variables or the service file)", args...)
	}
	return newOptionError(key, format+" "+notShown, args...)
}

func urlError(format string) error { return connError("url", format) }

// redactURL returns a URL the driver accepts with its passwords (the
// user's and any query parameter whose name holds "pass", "secret" or
// "token") replaced by xxxxx, and "(not shown)" for anything else: a URL
// whose password's end cannot be told, or a key=value string.
func redactURL(raw string) string {
	const hidden = "(not shown)"
	norm, isURL, err := checkURL(raw)
	if !isURL || err != nil {
		return hidden
	}
	scheme, rest, _ := strings.Cut(norm, "://")
	userinfo := ""
	if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
		userinfo, rest = rest[:i+1], rest[i+1:]
		if user, pw, ok := strings.Cut(userinfo[:i], ":"); ok && pw != "" {
			userinfo = user + ":xxxxx@"
		}
	}
	if head, query, ok := strings.Cut(rest, "?"); ok {
		pairs := strings.Split(query, "&")
		for i, pair := range pairs {
			k, v, ok := strings.Cut(pair, "=")
			name, err := url.PathUnescape(k)
			if !ok || strings.Contains(v, "=") || err != nil {
				return hidden // pgx refuses it: which part is secret is unclear
			}
			name = strings.ToLower(strings.Trim(name, " "))
			if strings.Contains(name, "pass") || strings.Contains(name, "secret") || strings.Contains(name, "token") {
				pairs[i] = k + "=xxxxx"
			}
		}
		rest = head + "?" + strings.Join(pairs, "&")
	}
	return scheme + "://" + userinfo + rest
}
