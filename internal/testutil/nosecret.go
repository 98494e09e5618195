package testutil

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// CheckPrintedNoSecret prints options (a driver's Options value, named
// typeName such as "redis.Options") in every way Printed knows, as a value,
// a pointer and a field of another struct (passed as wrapper), and fails t
// where a printed form shows secret (whole, but for its first byte, or
// hex-encoded) or, but for %x, misses one of show. In show, "Field:" stands
// for a field named Field as each form names it (see FieldAs).
func CheckPrintedNoSecret(t testing.TB, typeName string, options, pointer, wrapper any, secret string, show []string) {
	t.Helper()
	pkg, _, _ := strings.Cut(typeName, ".")
	printed := Printed(map[string]any{typeName: options, "*" + typeName: pointer, pkg + ".wrapper": wrapper})
	for how, s := range printed {
		if strings.Contains(s, secret) || strings.Contains(s, secret[1:]) || strings.Contains(s, hex.EncodeToString([]byte(secret))) {
			t.Errorf("%s shows the password: %s", how, s)
		}
		if strings.HasSuffix(how, "%x") {
			continue
		}
		for _, w := range show {
			if field, rest, ok := strings.Cut(w, ":"); ok && goField.MatchString(field) {
				w = FieldAs(how, field) + rest
			}
			if !strings.Contains(s, w) {
				t.Errorf("%s does not show %q: %s", how, w, s)
			}
		}
	}
	if s := fmt.Sprintf("%#v", options); !strings.HasPrefix(s, typeName+"{") {
		t.Errorf("%%#v = %s; want %s{...}", s, typeName)
	}
}

// goField is an exported Go field name.
var goField = regexp.MustCompile(`^[A-Z][A-Za-z]*$`)

// FieldAs is how the printed form how (a key of Printed) names a string
// field: `Field:"` in Go syntax, `"Field":"` in JSON, else `Field:`.
func FieldAs(how, field string) string {
	switch {
	case strings.HasSuffix(how, "%#v"):
		return field + `:"`
	case strings.Contains(how, "json") || strings.Contains(how, "zap.Reflect") || strings.Contains(how, "wrapper zap.Any"):
		return `"` + field + `":"`
	}
	return field + ":"
}
