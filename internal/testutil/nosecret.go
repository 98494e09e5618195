package testutil

import (
	"encoding/hex"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// PrintCase is a case of CheckOptionsPrinted: options of type O, and what
// printing them must still show. In Show, "Field:" stands for a field
// named Field as each printed form names it (see FieldAs).
type PrintCase[O any] struct {
	// Name names the subtest.
	Name string
	// Options are printed.
	Options O
	// Show is what every printed form (but %x) must contain.
	Show []string
}

// CheckOptionsPrinted runs each case as a subtest: it prints the case's
// options (a driver's Options, named typeName such as "redis.Options") in
// every way Printed knows, as a value, a pointer and a field of another
// struct (JSON names a field by its koanf key), and fails where a printed form shows secret (whole, but for its
// first byte, or hex-encoded) or, but for %x, misses one of Show. %#v must
// also name the type.
func CheckOptionsPrinted[O any](t *testing.T, typeName, secret string, cases []PrintCase[O]) {
	type wrapper struct{ Opts O }
	pkg, _, _ := strings.Cut(typeName, ".")
	keys := map[string]string{}
	for f := range reflect.TypeFor[O]().Fields() {
		keys[f.Name] = f.Tag.Get("koanf")
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			o := tc.Options
			for how, s := range Printed(map[string]any{typeName: o, "*" + typeName: &o, pkg + ".wrapper": wrapper{o}}) {
				if strings.Contains(s, secret) || strings.Contains(s, secret[1:]) || strings.Contains(s, hex.EncodeToString([]byte(secret))) {
					t.Errorf("%s shows the password: %s", how, s)
				}
				if strings.HasSuffix(how, "%x") {
					continue
				}
				for _, w := range tc.Show {
					if field, rest, ok := strings.Cut(w, ":"); ok && goField.MatchString(field) {
						w = fieldAs(how, field, keys[field]) + rest
					}
					if !strings.Contains(s, w) {
						t.Errorf("%s does not show %q: %s", how, w, s)
					}
				}
			}
			if s := fmt.Sprintf("%#v", o); !strings.HasPrefix(s, typeName+"{") {
				t.Errorf("%%#v = %s; want %s{...}", s, typeName)
			}
		})
	}
}

// goField is an exported Go field name.
var goField = regexp.MustCompile(`^[A-Z][A-Za-z]*$`)

// fieldAs is how the printed form how (a key of Printed) names a string
// field with this koanf key: `Field:"` in Go syntax, `"key":"` in JSON,
// else `Field:`.
func fieldAs(how, field, key string) string {
	switch {
	case strings.HasSuffix(how, "%#v"):
		return field + `:"`
	case strings.Contains(how, "json") || strings.Contains(how, "zap.Reflect") || strings.Contains(how, "wrapper zap.Any"):
		return `"` + key + `":"`
	}
	return field + ":"
}
