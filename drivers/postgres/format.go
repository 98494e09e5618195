package postgres

import (
	"encoding/json"
	"fmt"

	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/internal/redact"
)

// Options print (every fmt verb that reaches Format: see there), marshal
// to JSON and log (zap.Any, zap.Reflect) with the password shown as xxxxx
// when set, and the URL with its passwords replaced by xxxxx, or as "(not
// shown)" when the driver would refuse it or it is a key=value string (see
// redactURL).

// redacted returns o with its secrets replaced.
func (o Options) redacted() Options {
	if o.Password != "" {
		o.Password = config.Redacted
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
	return redact.GoString("postgres.Options", plainOptions(o.redacted()))
}

// Format prints the options as String does (GoString for %#v): see
// redact.Format for the verbs fmt does not pass to it.
func (o Options) Format(f fmt.State, verb rune) { redact.Format(f, verb, o.String, o.GoString) }

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

// A *Driver prints, marshals and logs as its Options do — secrets
// redacted — and nothing else: its other fields hold the pool's and
// connections' configurations, password included, which fmt would print
// raw.

// String describes the driver by its options, secrets redacted.
func (d *Driver) String() string {
	if d == nil {
		return "<nil>"
	}
	return "postgres.Driver{Options:" + d.opts.String() + "}"
}

// GoString is String in Go syntax, for %#v.
func (d *Driver) GoString() string {
	if d == nil {
		return "(*postgres.Driver)(nil)"
	}
	return "&postgres.Driver{Options:" + d.opts.GoString() + "}"
}

// Format prints the driver as String does (GoString for %#v).
func (d *Driver) Format(f fmt.State, verb rune) { redact.Format(f, verb, d.String, d.GoString) }

// MarshalJSON encodes the driver's options, secrets redacted.
func (d *Driver) MarshalJSON() ([]byte, error) {
	if d == nil {
		return []byte("null"), nil
	}
	return json.Marshal(struct {
		Options Options `json:"options"`
	}{d.opts})
}
