package redact

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Value prints, formats and marshals a value with its secrets redacted:
// a type with secrets returns one from its redacting method and calls it
// from its String, GoString, Format and MarshalJSON.
type Value struct {
	// Name is the type's "pkg.T", for %#v.
	Name string
	// Plain is the redacted value converted to a type without methods, so
	// that fmt and encoding/json do not call back.
	Plain any
}

// String is Plain in %+v.
func (v Value) String() string { return fmt.Sprintf("%+v", v.Plain) }

// GoString is Plain in Go syntax, named Name.
func (v Value) GoString() string { return GoString(v.Name, v.Plain) }

// Format prints as String does (GoString for %#v); see the function Format.
func (v Value) Format(f fmt.State, verb rune) { Format(f, verb, v.String, v.GoString) }

// MarshalJSON encodes Plain, a struct, as the object of its set fields
// under their configuration (koanf) keys, or their names where untagged:
// durations as Go duration strings, a field kept out of the configuration
// (koanf:"-", such as a *tls.Config) as true under its lower-cased name.
// Any other Plain is encoded as it is.
func (v Value) MarshalJSON() ([]byte, error) {
	rv := reflect.ValueOf(v.Plain)
	if rv.Kind() != reflect.Struct {
		return json.Marshal(v.Plain)
	}
	m := map[string]any{}
	for i := range rv.NumField() {
		f, sf := rv.Field(i), rv.Type().Field(i)
		key := cmp.Or(sf.Tag.Get("koanf"), sf.Name)
		switch {
		case !sf.IsExported() || f.IsZero():
		case key == "-":
			m[strings.ToLower(sf.Name)] = true
		case f.Type() == reflect.TypeFor[time.Duration]():
			m[key] = time.Duration(f.Int()).String()
		default:
			m[key] = f.Interface()
		}
	}
	return json.Marshal(m)
}

// Printer is what Owner prints of the options: a type with redacting
// String, GoString and MarshalJSON methods (such as one calling Value's).
type Printer interface {
	fmt.Stringer
	fmt.GoStringer
	json.Marshaler
}

// Owner prints, formats and marshals a pointer to a type (a driver) as
// its options print and nothing else: its other fields may hold the
// secrets raw (a client's configuration).
type Owner struct {
	// Name is the type's "pkg.T" (not the pointer's).
	Name string
	// Options are the owner's options; nil for a nil pointer.
	Options Printer
}

// String is "pkg.T{Options:...}", or "<nil>".
func (o Owner) String() string {
	if o.Options == nil {
		return "<nil>"
	}
	return o.Name + "{Options:" + o.Options.String() + "}"
}

// GoString is String in Go syntax: "&pkg.T{Options:...}", or
// "(*pkg.T)(nil)".
func (o Owner) GoString() string {
	if o.Options == nil {
		return "(*" + o.Name + ")(nil)"
	}
	return "&" + o.Name + "{Options:" + o.Options.GoString() + "}"
}

// Format prints as String does (GoString for %#v).
func (o Owner) Format(f fmt.State, verb rune) { Format(f, verb, o.String, o.GoString) }

// MarshalJSON encodes {"options":...} (the options' MarshalJSON), or null.
func (o Owner) MarshalJSON() ([]byte, error) {
	if o.Options == nil {
		return []byte("null"), nil
	}
	return json.Marshal(struct {
		Options json.Marshaler `json:"options"`
	}{o.Options})
}

// Mask replaces a secret's value wherever one is printed
// (config.Redacted).
const Mask = "xxxxx"

// Secret returns Mask for a secret that is set, "" for one that is not.
func Secret(s string) string {
	if s == "" {
		return ""
	}
	return Mask
}

// Addrs returns a copy of addrs with Mask for each address holding an @:
// not an address but perhaps a URL with a password (the drivers refuse
// it).
func Addrs(addrs []string) []string {
	out := slices.Clone(addrs)
	for i, a := range out {
		if strings.Contains(a, "@") {
			out[i] = Mask
		}
	}
	return out
}
