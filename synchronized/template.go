package synchronized

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrTemplate reports a malformed lock name template: an unbalanced brace or
// an empty field. Middleware and Wrap return it at construction.
var ErrTemplate = errors.New("synchronized: malformed lock name template")

// ErrLockName reports that a lock name could not be built for a request or
// an input: a template field missing from it (or empty), or an error of the
// name function. The HTTP middleware answers it with 400 Bad Request.
var ErrLockName = errors.New("synchronized: cannot name the lock")

// Template is a parsed lock name template such as "order:{id}": literal
// text with fields between braces. "{{" and "}}" stand for literal braces.
// A field may be a dotted path ("{customer.id}") where the input has nested
// values (see Wrap). Two fields are separated by literal text that does not
// begin with '%' ("{tenant}:{id}", not "{tenant}{id}").
//
// Values are escaped so that different inputs of one template never share
// a name: in each value, '%', every character of the template's literal
// text other than ASCII letters and digits, the first character of the
// text between two fields, and bytes that are not UTF-8 are
// percent-encoded (%XX per byte, upper-case hex). Under "{tenant}:{id}",
// tenant "a:b" and id "c" give "a%3Ab:c", tenant "a" and id "b:c" give
// "a:b%3Ac"; under "order:{id}", id "1:refund" gives "order:1%3Arefund".
// Values without such characters are written as they are ("order:42",
// "order:7f3c-a1"). Two templates escape only their own separators, so
// their names can meet: "order:{id}" with id "1-refund" and
// "order:{id}-refund" with id "1" both give "order:1-refund". Give each
// template its own prefix.
//
// A Template is immutable and safe for concurrent use.
type Template struct {
	text  string
	parts []part
	// escaped are the characters percent-encoded in values, besides '%'
	// and invalid UTF-8.
	escaped string
}

// part is literal text, or a field when field is set.
type part struct {
	lit   string
	field string
}

// ParseTemplate parses a lock name template. It returns an error wrapping
// ErrTemplate for an empty template, an unbalanced brace, an empty field,
// or two fields not separated by literal text (or separated by text
// beginning with '%').
func ParseTemplate(text string) (*Template, error) {
	if text == "" {
		return nil, fmt.Errorf("%w: empty", ErrTemplate)
	}
	t := &Template{text: text}
	var lit strings.Builder
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '{' && i+1 < len(text) && text[i+1] == '{':
			lit.WriteByte('{')
			i++
		case c == '}' && i+1 < len(text) && text[i+1] == '}':
			lit.WriteByte('}')
			i++
		case c == '}':
			return nil, fmt.Errorf("%w: %q: unbalanced '}' at byte %d (write '}}' for a literal brace)", ErrTemplate, text, i)
		case c == '{':
			end := strings.IndexAny(text[i+1:], "{}")
			if end < 0 || text[i+1+end] == '{' {
				return nil, fmt.Errorf("%w: %q: unclosed '{' at byte %d", ErrTemplate, text, i)
			}
			field := strings.TrimSpace(text[i+1 : i+1+end])
			if field == "" {
				return nil, fmt.Errorf("%w: %q: empty field at byte %d", ErrTemplate, text, i)
			}
			for seg := range strings.SplitSeq(field, ".") {
				if seg == "" {
					return nil, fmt.Errorf("%w: %q: empty path segment in field %q", ErrTemplate, text, field)
				}
			}
			if lit.Len() > 0 {
				t.parts = append(t.parts, part{lit: lit.String()})
				lit.Reset()
			}
			t.parts = append(t.parts, part{field: field})
			i += end + 1
		default:
			lit.WriteByte(c)
		}
	}
	if lit.Len() > 0 {
		t.parts = append(t.parts, part{lit: lit.String()})
	}
	if err := t.separate(); err != nil {
		return nil, err
	}
	return t, nil
}

// separate checks that fields are separated and sets the characters
// escaped in values: those of the literal text other than ASCII letters
// and digits, and the first one of the text between two fields. Then where
// a value ends is never in doubt: a value holds none of these characters
// raw, and its escapes (%XX) cannot be taken for the text after it.
func (t *Template) separate() error {
	var esc strings.Builder
	for i, p := range t.parts {
		if p.field != "" {
			if i+1 < len(t.parts) && t.parts[i+1].field != "" {
				return fmt.Errorf("%w: %q: fields {%s} and {%s} need literal text between them", ErrTemplate, t.text, p.field, t.parts[i+1].field)
			}
			continue
		}
		between := i > 0 && i+1 < len(t.parts)
		if between && p.lit[0] == '%' {
			return fmt.Errorf("%w: %q: the text after field {%s} begins with '%%', the escape of values", ErrTemplate, t.text, t.parts[i-1].field)
		}
		for j := 0; j < len(p.lit); {
			r, size := utf8.DecodeRuneInString(p.lit[j:])
			invalid := r == utf8.RuneError && size == 1 // escaped in values anyway
			if !invalid && (between && j == 0 || !isASCIIAlnum(r)) && !strings.ContainsRune(esc.String(), r) {
				esc.WriteRune(r)
			}
			j += size
		}
	}
	t.escaped = esc.String()
	return nil
}

// isASCIIAlnum reports whether r is an ASCII letter or digit.
func isASCIIAlnum(r rune) bool {
	return '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
}

// escape percent-encodes in v '%', the template's escaped characters and
// the bytes that are not UTF-8.
func (t *Template) escape(b *strings.Builder, v string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(v); {
		r, size := utf8.DecodeRuneInString(v[i:])
		if r == '%' || r == utf8.RuneError && size == 1 || strings.ContainsRune(t.escaped, r) {
			for _, c := range []byte(v[i : i+size]) {
				b.WriteByte('%')
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xF])
			}
		} else {
			b.WriteString(v[i : i+size])
		}
		i += size
	}
}

// String returns the template's text.
func (t *Template) String() string { return t.text }

// Fields returns the template's fields in order of appearance (repeated
// fields repeated).
func (t *Template) Fields() []string {
	var out []string
	for _, p := range t.parts {
		if p.field != "" {
			out = append(out, p.field)
		}
	}
	return out
}

// Execute builds a lock name, asking lookup for the value of each field,
// escaped as Template describes. A field that lookup reports missing
// (false), or whose value is empty, gives an error wrapping ErrLockName
// that names the field.
func (t *Template) Execute(lookup func(field string) (string, bool)) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.field == "" {
			b.WriteString(p.lit)
			continue
		}
		v, ok := lookup(p.field)
		if !ok || v == "" {
			return "", fmt.Errorf("%w: field %q of %q is missing or empty", ErrLockName, p.field, t.text)
		}
		t.escape(&b, v)
	}
	return b.String(), nil
}
