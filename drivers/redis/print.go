package redis

import (
	"fmt"
	"net/url"

	"github.com/mutexfx/mutexfx/internal/redact"
)

// plainOptions is Options without methods: printed, it does not call back.
type plainOptions Options

// printed is the options as they print: Password and SentinelPassword as
// xxxxx when set, an address holding an @ (perhaps a URL with a password)
// as xxxxx, and the URL's user part as xxxxx (the whole URL when it does
// not parse cleanly: a password holding / ? # or @ would end the user part
// early).
func (o Options) printed() redact.Value {
	o.Password = redact.Secret(o.Password)
	o.SentinelPassword = redact.Secret(o.SentinelPassword)
	o.Addrs = redact.Addrs(o.Addrs)
	o.URL = redactURL(o.URL)
	return redact.Value{Name: "redis.Options", Plain: plainOptions(o)}
}

// String describes the options with Password and SentinelPassword shown as
// xxxxx when set, an address holding an @ as xxxxx, and the URL's user part
// as xxxxx (the whole URL when it does not parse cleanly: a password holding
// / ? # or @ would end the user part early), so that what it returns never
// holds a password.
func (o Options) String() string { return o.printed().String() }

// GoString is String in Go syntax, for %#v (also when the options are
// printed inside another value).
func (o Options) GoString() string { return o.printed().GoString() }

// Format prints the options as String does (GoString for %#v): see
// redact.Format for the verbs fmt does not pass to it.
func (o Options) Format(f fmt.State, verb rune) { o.printed().Format(f, verb) }

// MarshalJSON encodes the options with their secrets redacted as in String
// (encoding/json, and zap's JSON encoder).
func (o Options) MarshalJSON() ([]byte, error) { return o.printed().MarshalJSON() }

// redactURL replaces the user part of a URL (name and password: a password
// alone is sometimes written in the name's place) with xxxxx, or the whole
// URL when its user part cannot be told for sure.
func redactURL(raw string) string {
	if raw == "" {
		return ""
	}
	parsed, err := url.Parse(raw)
	if err != nil || misplacedAt(raw) || !hasPrefixFold(raw, parsed.Scheme+"://") || parsed.Opaque != "" {
		return redact.Mask
	}
	if parsed.User != nil {
		parsed.User = url.User(redact.Mask)
	}
	return parsed.String()
}
