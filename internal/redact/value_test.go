package redact

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

type plainOpts struct{ User, Password string }

// TestValueAndOwner: a Value prints and marshals its Plain under its Name,
// an Owner wraps it, and a nil Owner prints as a nil pointer does.
func TestValueAndOwner(t *testing.T) {
	v := Value{Name: "pkg.Options", Plain: plainOpts{"u", "xxxxx"}}
	own := Owner{Name: "pkg.Driver", Options: v}
	none := Owner{Name: "pkg.Driver"}
	for _, tc := range []struct {
		format string
		arg    any
		want   string
	}{
		{"%v", v, "{User:u Password:xxxxx}"},
		{"%#v", v, `pkg.Options{User:"u", Password:"xxxxx"}`},
		{"%q", v, `"{User:u Password:xxxxx}"`},
		{"%v", own, "pkg.Driver{Options:{User:u Password:xxxxx}}"},
		{"%#v", own, `&pkg.Driver{Options:pkg.Options{User:"u", Password:"xxxxx"}}`},
		{"%v", none, "<nil>"},
		{"%#v", none, "(*pkg.Driver)(nil)"},
	} {
		if got := fmt.Sprintf(tc.format, tc.arg); got != tc.want {
			t.Errorf("Sprintf(%q) = %s; want %s", tc.format, got, tc.want)
		}
	}
	for _, tc := range []struct {
		arg  any
		want string
	}{
		{v, `{"Password":"xxxxx","User":"u"}`},
		{own, `{"options":{"Password":"xxxxx","User":"u"}}`},
		{none, "null"},
	} {
		if b, err := json.Marshal(tc.arg); err != nil || string(b) != tc.want {
			t.Errorf("json.Marshal = %s, %v; want %s", b, err, tc.want)
		}
	}
}

// TestValueJSONKeys: a Value's JSON holds the set fields of Plain under
// their configuration keys, durations as strings, an untagged-out field as
// true under its lower-cased name, and nothing of the unset or unexported.
func TestValueJSONKeys(t *testing.T) {
	type keyed struct {
		Host    string        `koanf:"host"`
		Port    int           `koanf:"port"`
		Timeout time.Duration `koanf:"connectTimeout"`
		TLS     *struct{}     `koanf:"-"`
		Unset   string        `koanf:"unset"`
		hidden  string
	}
	for _, tc := range []struct {
		plain any
		want  string
	}{
		{keyed{Host: "h", Port: 5, Timeout: 1500 * time.Millisecond, TLS: &struct{}{}, hidden: "x"},
			`{"connectTimeout":"1.5s","host":"h","port":5,"tls":true}`},
		{keyed{}, `{}`},
		{[]string{"a"}, `["a"]`},
	} {
		if b, err := json.Marshal(Value{Name: "pkg.Options", Plain: tc.plain}); err != nil || string(b) != tc.want {
			t.Errorf("json.Marshal(%+v) = %s, %v; want %s", tc.plain, b, err, tc.want)
		}
	}
}
