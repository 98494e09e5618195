package redact

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// secretive prints its secret only through Format.
type secretive struct{ secret string }

func (s secretive) String() string                { return "{secret:xxxxx}" }
func (s secretive) GoString() string              { return "redact.secretive{secret:\"xxxxx\"}" }
func (s secretive) Format(f fmt.State, verb rune) { Format(f, verb, s.String, s.GoString) }

// TestFormat: every verb that reaches Format prints the redacted form, with
// its flags; %#v prints the Go syntax one.
func TestFormat(t *testing.T) {
	v := secretive{"S3cr3tPW"}
	for _, tc := range []struct{ format, want string }{
		{"%v", "{secret:xxxxx}"},
		{"%+v", "{secret:xxxxx}"},
		{"%s", "{secret:xxxxx}"},
		{"%q", `"{secret:xxxxx}"`},
		{"%20.8s", "            {secret:"},
		{"%x", fmt.Sprintf("%x", "{secret:xxxxx}")},
		{"%d", "%!d(string={secret:xxxxx})"},
		{"%#v", `redact.secretive{secret:"xxxxx"}`},
	} {
		if got := fmt.Sprintf(tc.format, v); got != tc.want {
			t.Errorf("%s: %q; want %q", tc.format, got, tc.want)
		}
	}
}

// TestGoString: the plain type's name gives way to the type's.
func TestGoString(t *testing.T) {
	type plain secretive
	if got, want := GoString("redact.secretive", plain{"xxxxx"}), `redact.secretive{secret:"xxxxx"}`; got != want {
		t.Fatalf("GoString = %s; want %s", got, want)
	}
}

// TestQuotes: a secret is found as is and escaped both ways; an unset one
// is never found.
func TestQuotes(t *testing.T) {
	for _, tc := range []struct {
		msg     string
		secrets []string
		want    bool
	}{
		{"bad password p@ss/w rd", []string{"p@ss/w rd"}, true},
		{"bad value p%40ss%2Fw+rd", []string{"p@ss/w rd"}, true}, // query-escaped
		{"bad value p@ss%2Fw%20rd", []string{"p@ss/w rd"}, true}, // path-escaped
		{"bad value", []string{"", "other"}, false},
		{"bad value", nil, false},
		{"second one: s3cr3t", []string{"x9", "s3cr3t"}, true},
	} {
		if got := Quotes(tc.msg, tc.secrets...); got != tc.want {
			t.Errorf("Quotes(%q, %q) = %v; want %v", tc.msg, tc.secrets, got, tc.want)
		}
	}
}
