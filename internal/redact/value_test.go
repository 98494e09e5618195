package redact

import (
	"encoding/json"
	"fmt"
	"testing"
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
		{v, `{"User":"u","Password":"xxxxx"}`},
		{own, `{"options":{"User":"u","Password":"xxxxx"}}`},
		{none, "null"},
	} {
		if b, err := json.Marshal(tc.arg); err != nil || string(b) != tc.want {
			t.Errorf("json.Marshal = %s, %v; want %s", b, err, tc.want)
		}
	}
}
