package postgres

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/mutexfx/mutexfx/internal/redact"
)

// Options print (every fmt verb that reaches Format: see there), marshal
// to JSON and log (zap.Any, zap.Reflect) with the password shown as xxxxx
// when set, and the URL with its passwords replaced by xxxxx, or as "(not
// shown)" when the driver would refuse it or it is a key=value string (see
// redactURL).

// plainOptions has Options' fields but not their methods: no recursion.
type plainOptions Options

// redacted returns o with its secrets replaced.
func (o Options) redacted() Options {
	o.Password = redact.Secret(o.Password)
	if o.URL != "" {
		o.URL = redactURL(o.URL)
	}
	return o
}

// printed is the options with their secrets redacted, as they print.
func (o Options) printed() redact.Value {
	return redact.Value{Name: "postgres.Options", Plain: plainOptions(o.redacted())}
}

// String describes the options, secrets redacted, as %+v would.
func (o Options) String() string { return o.printed().String() }

// GoString describes the options, secrets redacted, as %#v would.
func (o Options) GoString() string { return o.printed().GoString() }

// Format prints the options as String does (GoString for %#v): see
// redact.Format for the verbs fmt does not pass to it.
func (o Options) Format(f fmt.State, verb rune) { o.printed().Format(f, verb) }

// MarshalJSON gives the options' JSON form, secrets redacted: the
// configuration keys of the fields that are set, durations as Go duration
// strings, TLS as "tls": true when one is set.
func (o Options) MarshalJSON() ([]byte, error) {
	v := reflect.ValueOf(o.redacted())
	m := map[string]any{}
	for i := range v.NumField() {
		f, key := v.Field(i), v.Type().Field(i).Tag.Get("koanf")
		switch d, isDuration := f.Interface().(time.Duration); {
		case f.IsZero():
		case key == "-": // TLS
			m["tls"] = true
		case isDuration:
			m[key] = d.String()
		default:
			m[key] = f.Interface()
		}
	}
	return json.Marshal(m)
}

// A Driver prints, marshals and logs as its Options do — secrets
// redacted — and nothing else: its other fields hold the pool's and
// connections' configurations, password included, which fmt would print
// raw.

// printed is the driver as it prints: its options, secrets redacted.
func (b *base) printed() redact.Owner { return redact.Owner{Name: "postgres.Driver", Options: b.opts} }

// String describes the driver by its options, secrets redacted.
func (b *base) String() string { return b.printed().String() }

// GoString is String in Go syntax, for %#v.
func (b *base) GoString() string { return b.printed().GoString() }

// Format prints the driver as String does (GoString for %#v).
func (b *base) Format(f fmt.State, verb rune) { b.printed().Format(f, verb) }

// MarshalJSON encodes the driver's options, secrets redacted.
func (b *base) MarshalJSON() ([]byte, error) { return b.printed().MarshalJSON() }
