package synchronized

import (
	"errors"
	"fmt"
	"strings"
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
// values (see Wrap). A Template is immutable and safe for concurrent use.
type Template struct {
	text  string
	parts []part
}

// part is literal text, or a field when field is set.
type part struct {
	lit   string
	field string
}

// ParseTemplate parses a lock name template. It returns an error wrapping
// ErrTemplate for an empty template, an unbalanced brace or an empty field.
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
	return t, nil
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

// Execute builds a lock name, asking lookup for the value of each field.
// A field that lookup reports missing (false), or whose value is empty,
// gives an error wrapping ErrLockName that names the field.
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
		b.WriteString(v)
	}
	return b.String(), nil
}
