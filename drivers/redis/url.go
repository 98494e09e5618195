package redis

import (
	"crypto/tls"
	"net/url"
	"reflect"
	"slices"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/redact"
)

// urlProblems are the kinds of url.Parse errors, named in New's error in
// place of the parser's message, which quotes parts of the URL.
var urlProblems = []string{
	"invalid port", "invalid character", "invalid URL escape", "invalid control character", "invalid userinfo",
	"invalid IP-literal", "missing ']' in host", "invalid host", "missing protocol scheme",
	"first path segment in URL cannot contain colon",
}

// notShown ends the errors of a URL that could not be parsed.
const notShown = "(the URL is not shown: it may hold a password; percent-encode / ? # @ : in the user name and password)"

// fromURL parses o.URL into u: the address(es), user, password, database,
// TLS and every query parameter go-redis's parser reads (ParseURL, or
// ParseClusterURL in Cluster mode), each into the go-redis option of the
// same name. universal then applies Options' fields and the driver's
// defaults over them.
//
// Errors never contain the URL (it may hold a password), nor any part of
// one that could not be parsed: a password with an unescaped / ? or # ends
// the host part early, so the parser would take pieces of it for the port,
// the path or the query, and the host from inside it.
func (o Options) fromURL(u *goredis.UniversalOptions) error {
	if misplacedAt(o.URL) {
		return drivers.OptionErrorf("url", "an @ after the host (in the path, query or fragment); percent-encode an @ in a "+
			"query value as %%40 %s", notShown)
	}
	parsed, err := url.Parse(o.URL)
	if err != nil {
		kind := "malformed"
		for _, p := range urlProblems {
			if strings.Contains(err.Error(), p) {
				kind = p
				break
			}
		}
		return drivers.OptionErrorf("url", "%s %s", kind, notShown)
	}
	hier := hasPrefixFold(o.URL, parsed.Scheme+"://")
	switch {
	case parsed.Scheme != "redis" && parsed.Scheme != "rediss" && hier:
		return drivers.OptionErrorf("url", "scheme must be redis or rediss, not %q", parsed.Scheme)
	case !hier:
		// "user:password@host" without a scheme parses as scheme "user";
		// "redis:password@host" would dial localhost without the password.
		return drivers.OptionErrorf("url", "must start with redis:// or rediss:// %s", notShown)
	}
	secret, _ := parsed.User.Password()
	var src any
	var skip []string
	if o.Cluster {
		if db := strings.Trim(parsed.Path, "/"); db != "" && db != "0" {
			return drivers.OptionErrorf("url", "the database must be 0 in cluster mode")
		}
		co, err := goredis.ParseClusterURL(o.URL)
		if err != nil {
			return parseError(err, o.URL, parsed, secret, o.Password)
		}
		src = co
	} else {
		so, err := goredis.ParseURL(o.URL)
		if err != nil {
			return parseError(err, o.URL, parsed, secret, o.Password)
		}
		u.Addrs = []string{so.Addr}
		src, skip = so, []string{"Addr", "Network"}
	}
	if lost := copyParsed(u, src, skip...); len(lost) > 0 {
		return drivers.OptionErrorf("url", "go-redis options %s, set by the URL's parameters, have no equivalent in "+
			"redis.UniversalOptions", strings.Join(lost, ", "))
	}
	if u.TLSConfig != nil && u.TLSConfig.MinVersion == 0 {
		u.TLSConfig.MinVersion = tls.VersionTLS12 // ParseClusterURL leaves it to crypto/tls
	}
	return nil
}

// copyParsed copies every exported field of *src (the go-redis options
// parsed from a URL) that is not zero into the field of u of the same name
// and type. It returns the names of the non-zero fields u has none for,
// other than skip: settings of the URL that would be lost.
func copyParsed(u *goredis.UniversalOptions, src any, skip ...string) []string {
	dst := reflect.ValueOf(u).Elem()
	sv := reflect.ValueOf(src).Elem()
	var lost []string
	for i := range sv.NumField() {
		f := sv.Type().Field(i)
		v := sv.Field(i)
		if !f.IsExported() || v.IsZero() || slices.Contains(skip, f.Name) {
			continue
		}
		d := dst.FieldByName(f.Name)
		if !d.IsValid() || d.Type() != f.Type {
			lost = append(lost, f.Name)
			continue
		}
		d.Set(v)
	}
	return lost
}

// misplacedAt reports whether raw has an @ after its host part, which ends
// at the first / ? or # after "://": in the path, the query or the
// fragment. Either the user name or password holds an unescaped / ? or #
// (the parser would then take the host from inside the password, and
// pieces of it for the port, path or query), or a query value holds an @
// (client_name=billing@eu). The two cannot be told apart, so both are
// refused: an @ in a query value must be percent-encoded (%40).
func misplacedAt(raw string) bool {
	i := strings.Index(raw, "://")
	if i < 0 {
		return false
	}
	rest := raw[i+len("://"):]
	end := strings.IndexAny(rest, "/?#")
	return end >= 0 && strings.Contains(rest[end:], "@")
}

// hasPrefixFold reports whether s starts with prefix, ignoring case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// scrub removes the URL from an error message, and withholds a message
// that contains a secret (redact.Quotes) altogether.
// parseError is the url option's error for go-redis's parser error err on
// rawURL (parsed). With a password among the query parameters, the names
// of parameters the parser does not know are withheld: a password with an
// unescaped & ends early, and the rest reads as such a name.
func parseError(err error, rawURL string, parsed *url.URL, secrets ...string) error {
	var inQuery bool
	for k, v := range parsed.Query() {
		if strings.EqualFold(k, "password") {
			inQuery = true
			secrets = append(secrets, v...)
		}
	}
	if inQuery && strings.Contains(err.Error(), "unexpected option") {
		return drivers.OptionErrorf("url", "has query parameters go-redis does not know (their names are withheld: "+
			"they may be pieces of the password; percent-encode an & in a query value as %%26)")
	}
	return drivers.OptionErrorf("url", "%s", scrub(err.Error(), rawURL, secrets...))
}

func scrub(msg, rawURL string, secrets ...string) string {
	if rawURL != "" {
		msg = strings.ReplaceAll(msg, rawURL, "<url>")
	}
	if redact.Quotes(msg, secrets...) {
		return "invalid (the parser's message is withheld: it may quote the password)"
	}
	return msg
}
