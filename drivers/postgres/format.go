package postgres

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Options print (every fmt verb that reaches Format: see there), marshal
// to JSON and log (zap.Any, zap.Reflect) with the password shown as xxxxx
// when set, and the URL with its passwords replaced by xxxxx, or as "(not
// shown)" when the driver would refuse it or it is a key=value string (see
// redactURL).

// redacted returns o with its secrets replaced.
func (o Options) redacted() Options {
	if o.Password != "" {
		o.Password = "xxxxx"
	}
	if o.URL != "" {
		o.URL = redactURL(o.URL)
	}
	return o
}

// plainOptions has Options' fields but not their methods: no recursion.
type plainOptions Options

// String describes the options, secrets redacted, as %+v would.
func (o Options) String() string {
	return fmt.Sprintf("%+v", plainOptions(o.redacted()))
}

// GoString describes the options, secrets redacted, as %#v would.
func (o Options) GoString() string {
	s := fmt.Sprintf("%#v", plainOptions(o.redacted()))
	return "postgres.Options" + strings.TrimPrefix(s, "postgres.plainOptions")
}

// Format prints the options as String does, with the verb and its flags
// (GoString for %#v), so that %d, %t, %x and the other verbs print no
// password either. fmt does not call it for %T (the type), %p, or a %w
// whose operand is not an error, and the last two print the fields raw:
// "%!p(postgres.Options={...})" (%p of a pointer prints the address only) and
// "%!w(...)" (fmt.Errorf("%w", x), which go vet flags). Nor can fmt call
// it on options held in an unexported field of another struct, whose fields
// it prints raw with every verb (encoding/json and zap skip such a field).
func (o Options) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, o.GoString())
		return
	}
	_, _ = fmt.Fprintf(f, fmt.FormatString(f, verb), o.String())
}

// optionsJSON is the JSON form of Options: the configuration keys, the
// fields that are set, durations as Go duration strings, TLS as whether
// one is set.
type optionsJSON struct {
	URL               string `json:"url,omitempty"`
	Host              string `json:"host,omitempty"`
	Port              int    `json:"port,omitempty"`
	Database          string `json:"database,omitempty"`
	Username          string `json:"username,omitempty"`
	Password          string `json:"password,omitempty"`
	SSLMode           string `json:"sslMode,omitempty"`
	TLS               bool   `json:"tls,omitempty"`
	Mode              string `json:"mode,omitempty"`
	Table             string `json:"table,omitempty"`
	Channel           string `json:"channel,omitempty"`
	Unlogged          bool   `json:"unlogged,omitempty"`
	SynchronousCommit string `json:"synchronousCommit,omitempty"`
	MaxSessions       int    `json:"maxSessions,omitempty"`
	MaxConns          int32  `json:"maxConns,omitempty"`
	ConnectTimeout    string `json:"connectTimeout,omitempty"`
	StallTimeout      string `json:"stallTimeout,omitempty"`
}

// MarshalJSON gives the options' JSON form, secrets redacted.
func (o Options) MarshalJSON() ([]byte, error) {
	r := o.redacted()
	j := optionsJSON{
		URL: r.URL, Host: r.Host, Port: r.Port, Database: r.Database, Username: r.Username, Password: r.Password,
		SSLMode: r.SSLMode, TLS: r.TLS != nil, Mode: r.Mode, Table: r.Table, Channel: r.Channel,
		Unlogged: r.Unlogged, SynchronousCommit: r.SynchronousCommit, MaxSessions: r.MaxSessions, MaxConns: r.MaxConns,
	}
	if r.ConnectTimeout != 0 {
		j.ConnectTimeout = r.ConnectTimeout.String()
	}
	if r.StallTimeout != 0 {
		j.StallTimeout = r.StallTimeout.String()
	}
	return json.Marshal(j)
}
