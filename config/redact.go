package config

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mutexfx/mutexfx/internal/redact"
)

// Redacted replaces a secret's value wherever a driver block is printed.
const Redacted = redact.Mask

// String describes the driver block with the values that may be
// credentials replaced by Redacted: those of keys named like one (url, dsn,
// password, sentinelPassword, token, …) and strings that look like one (an
// @ as in user:password@host, a password= setting). A secret that is set
// shows as xxxxx, one that is empty as "".
func (d Driver) String() string {
	return fmt.Sprintf("{Type:%s Client:%s Options:%v Path:%s}", redactType(d.Type), d.Client, redactMap(d.Options), d.Path)
}

// GoString is String in Go syntax, for %#v (also when the block is printed
// inside a Store or a Config).
func (d Driver) GoString() string {
	return fmt.Sprintf("config.Driver{Type:%q, Client:%q, Options:%#v, Path:%q}", redactType(d.Type), d.Client, redactMap(d.Options), d.Path)
}

// Format prints the block as String does (GoString for %#v): see
// redact.Format for the verbs fmt does not pass to it.
func (d Driver) Format(f fmt.State, verb rune) { redact.Format(f, verb, d.String, d.GoString) }

// MarshalJSON encodes the block with its secrets redacted as in String
// (encoding/json, and zap's JSON encoder for zap.Any of a Store or a
// Config).
func (d Driver) MarshalJSON() ([]byte, error) {
	type plain Driver // no methods: no recursion
	c := plain(d)
	c.Type, c.Options = redactType(d.Type), redactMap(d.Options)
	return json.Marshal(c)
}

// GoString is the store in Go syntax, for %#v, with its driver's secrets
// redacted.
func (s Store) GoString() string {
	type plain Store // no methods: no recursion; Driver keeps its own
	return redact.GoString("config.Store", plain(s))
}

// secretKeys are the parts of an option's name that make its value a
// secret, lower case: the whole value is redacted (a URL or DSN too: a
// password in one may hold characters that end its user part early).
var secretKeys = []string{
	"pass", "pwd", "secret", "token", "credential", "auth", "apikey", "api_key", "privatekey", "private_key",
	"dsn", "url", "uri", "connstr", "connectionstring", "connection_string",
}

func secretKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range secretKeys {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// secretLike reports whether s may hold a credential wherever it is: a user
// part (user:password@host), or a password setting (host=h password=x).
func secretLike(s string) bool {
	if strings.Contains(s, "@") {
		return true
	}
	l := strings.ToLower(s)
	for _, w := range []string{"pass", "pwd", "secret", "token"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// urlLike reports whether s is a URL or a DSN, which a driver type never
// is: driver: "redis://user:password@host" must not be quoted.
func urlLike(s string) bool { return strings.Contains(s, "@") || strings.Contains(s, "://") }

func redactType(t string) string {
	if urlLike(t) {
		return Redacted
	}
	return t
}

func redactString(s string) string {
	if secretLike(s) {
		return Redacted
	}
	return s
}

// redactMap returns a copy of m with the values of secret keys, and strings
// that look like secrets, replaced by Redacted, in nested maps and lists
// too. m itself is left as it is.
func redactMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		if secretKey(k) && !empty(v) {
			out[k] = Redacted
			continue
		}
		out[k] = redactValue(v)
	}
	return out
}

func redactValue(v any) any {
	switch x := v.(type) {
	case string:
		return redactString(x)
	case map[string]any:
		return redactMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactValue(e)
		}
		return out
	case []string:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = redactString(e)
		}
		return out
	}
	return v
}

// empty reports whether an option is unset: a secret that is empty shows as
// such.
func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	}
	return false
}
