package etcd

import (
	"fmt"

	"github.com/mutexfx/mutexfx/internal/redact"
)

// plainOptions is Options without methods: printed, it does not call back.
type plainOptions Options

// printed is the options as they print: Password as xxxxx when set, and
// an endpoint holding an @ (which New refuses) as xxxxx.
func (o Options) printed() redact.Value {
	o.Password = redact.Secret(o.Password)
	o.Endpoints = redact.Addrs(o.Endpoints)
	return redact.Value{Name: "etcd.Options", Plain: plainOptions(o)}
}

// String describes the options with Password shown as xxxxx when set (and
// an endpoint holding an @, which New refuses, as xxxxx), so that what it
// returns never holds a password.
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

// A *Driver prints, marshals and logs as its Options do — the password
// redacted — and nothing else: its client configuration holds the
// password, which fmt would print raw.

// printed is the driver as it prints: its options, secrets redacted.
func (d *Driver) printed() redact.Owner {
	if d == nil {
		return redact.Owner{Name: "etcd.Driver"}
	}
	return redact.Owner{Name: "etcd.Driver", Options: d.opts}
}

// String describes the driver by its options, secrets redacted.
func (d *Driver) String() string { return d.printed().String() }

// GoString is String in Go syntax, for %#v.
func (d *Driver) GoString() string { return d.printed().GoString() }

// Format prints the driver as String does (GoString for %#v).
func (d *Driver) Format(f fmt.State, verb rune) { d.printed().Format(f, verb) }

// MarshalJSON encodes the driver's options, secrets redacted.
func (d *Driver) MarshalJSON() ([]byte, error) { return d.printed().MarshalJSON() }
