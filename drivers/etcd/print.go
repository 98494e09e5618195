package etcd

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/internal/redact"
)

// String describes the options with Password shown as xxxxx when set (and
// an endpoint holding an @, which New refuses, as xxxxx), so that what it
// returns never holds a password.
func (o Options) String() string {
	type plain Options // no methods: no recursion
	return fmt.Sprintf("%+v", plain(o.redacted()))
}

// GoString is String in Go syntax, for %#v (also when the options are
// printed inside another value).
func (o Options) GoString() string {
	type plain Options
	return redact.GoString("etcd.Options", plain(o.redacted()))
}

// Format prints the options as String does (GoString for %#v): see
// redact.Format for the verbs fmt does not pass to it.
func (o Options) Format(f fmt.State, verb rune) { redact.Format(f, verb, o.String, o.GoString) }

// MarshalJSON encodes the options with the password redacted as in String
// (encoding/json, and zap's JSON encoder).
func (o Options) MarshalJSON() ([]byte, error) {
	type plain Options
	return json.Marshal(plain(o.redacted()))
}

func (o Options) redacted() Options {
	if o.Password != "" {
		o.Password = config.Redacted
	}
	o.Endpoints = append([]string(nil), o.Endpoints...)
	for i, e := range o.Endpoints {
		if strings.Contains(e, "@") { // perhaps a URL with a password
			o.Endpoints[i] = config.Redacted
		}
	}
	return o
}

// A *Driver prints, marshals and logs as its Options do — the password
// redacted — and nothing else: its client configuration holds the
// password, which fmt would print raw.

// String describes the driver by its options, secrets redacted.
func (d *Driver) String() string {
	if d == nil {
		return "<nil>"
	}
	return "etcd.Driver{Options:" + d.opts.String() + "}"
}

// GoString is String in Go syntax, for %#v.
func (d *Driver) GoString() string {
	if d == nil {
		return "(*etcd.Driver)(nil)"
	}
	return "&etcd.Driver{Options:" + d.opts.GoString() + "}"
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
