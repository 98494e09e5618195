// Package redact holds what the types that print without their secrets
// (the drivers' Options, config.Driver) share.
package redact

import (
	"fmt"
	"io"
	"net/url"
	"strings"
)

// Format is the Format method of such a type: it prints str() with the
// verb and its flags, or goStr() for %#v, so that %d, %t, %x and the other
// verbs print no secret either.
//
// fmt does not call a Format method for %T (the type), %p, or a %w whose
// operand is not an error, and the last two print the fields raw:
// "%!p(pkg.T={...})" (%p of a pointer prints the address only) and
// "%!w(...)" (fmt.Errorf("%w", x), which go vet flags). Nor can fmt call it
// on a value held in an unexported field of another struct, whose fields
// it prints raw with every verb (encoding/json and zap skip such a field).
func Format(f fmt.State, verb rune, str, goStr func() string) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, goStr())
		return
	}
	_, _ = fmt.Fprintf(f, fmt.FormatString(f, verb), str())
}

// GoString is the GoString method of such a type: plain, its redacted
// value converted to a type without methods (so that fmt does not call
// back), in Go syntax, named as name (the type's "pkg.T") instead of the
// plain type.
func GoString(name string, plain any) string {
	return name + strings.TrimPrefix(fmt.Sprintf("%#v", plain), fmt.Sprintf("%T", plain))
}

// Quotes reports whether msg, a parser's message, holds one of secrets
// (those set) as is, query- or path-escaped. Such a message is withheld
// whole: masking each occurrence would show where a short secret matches
// the parser's own words.
func Quotes(msg string, secrets ...string) bool {
	for _, s := range secrets {
		if s != "" && (strings.Contains(msg, s) || strings.Contains(msg, url.QueryEscape(s)) || strings.Contains(msg, url.PathEscape(s))) {
			return true
		}
	}
	return false
}
