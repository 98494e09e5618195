package synchronized

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// getter reads one template field from an input value; false when the
// value is missing (nil pointer, absent map key).
type getter func(v reflect.Value) (string, bool)

var (
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	stringerType      = reflect.TypeFor[fmt.Stringer]()
	jsonNumberType    = reflect.TypeFor[json.Number]()
)

// compileField resolves the dotted path against type t once. Struct fields
// match by Go name or json tag name (promoted fields of embedded structs
// included); maps with string keys are indexed; interfaces (map[string]any
// values, any fields) are looked into at call time.
func compileField(t reflect.Type, path string) (getter, error) {
	segs := strings.Split(path, ".")
	g, err := compilePath(t, segs)
	if err != nil {
		return nil, fmt.Errorf("%w: field %q of %s: %w", ErrTemplate, path, t, err)
	}
	return g, nil
}

func compilePath(t reflect.Type, segs []string) (getter, error) {
	switch {
	case t.Kind() == reflect.Pointer && len(segs) > 0:
		next, err := compilePath(t.Elem(), segs)
		if err != nil {
			return nil, err
		}
		return throughPointer(next), nil
	case len(segs) == 0:
		return leaf(t)
	case t.Kind() == reflect.Interface:
		return func(v reflect.Value) (string, bool) { return dynamic(v, segs) }, nil
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		next, err := compilePath(t.Elem(), segs[1:])
		if err != nil {
			return nil, err
		}
		key := reflect.ValueOf(segs[0]).Convert(t.Key())
		return func(v reflect.Value) (string, bool) {
			e := v.MapIndex(key)
			if !e.IsValid() {
				return "", false
			}
			return next(e)
		}, nil
	case t.Kind() == reflect.Struct:
		f, err := fieldByName(t, segs[0])
		if err != nil {
			return nil, err
		}
		next, err := compilePath(f.Type, segs[1:])
		if err != nil {
			return nil, err
		}
		index := f.Index
		return func(v reflect.Value) (string, bool) {
			fv, err := v.FieldByIndexErr(index)
			if err != nil { // a nil embedded pointer
				return "", false
			}
			return next(fv)
		}, nil
	default:
		return nil, fmt.Errorf("cannot look up %q in a %s", segs[0], t)
	}
}

// fieldByName finds the exported field of struct t that name names: by Go
// name (Go's rules for promoted fields) or by json key (encoding/json's
// rules, see jsonField). A name that is the Go name of one field and the
// json key of another, or an ambiguous json key, is an error.
func fieldByName(t reflect.Type, name string) (reflect.StructField, error) {
	var byName *reflect.StructField
	for _, f := range reflect.VisibleFields(t) {
		if f.IsExported() && f.Name == name {
			byName = &f
			break
		}
	}
	byKey, found, err := jsonField(t, name)
	switch {
	case err != nil && byName == nil:
		return reflect.StructField{}, err
	case byName != nil && found && !slices.Equal(byName.Index, byKey.Index):
		return reflect.StructField{}, fmt.Errorf("%q is the Go name of field %s and the json key of field %s in %s: rename one",
			name, byName.Name, byKey.Name, t)
	case byName != nil:
		return *byName, nil
	case found:
		return byKey, nil
	}
	return reflect.StructField{}, fmt.Errorf("%s has no exported field or json key %q", t, name)
}

// leaf formats a value of type t: strings, booleans and numbers, and types
// implementing encoding.TextMarshaler or fmt.Stringer. Other kinds
// (structs, slices, maps) are refused: their text is no stable lock name.
// A nil pointer or nil interface is a missing value.
func leaf(t reflect.Type) (getter, error) {
	switch {
	case t == jsonNumberType: // a Stringer, but a number to format as one
		return func(v reflect.Value) (string, bool) { return formatJSONNumber(json.Number(v.String())) }, nil
	case t.Kind() == reflect.Pointer && t.Elem() == jsonNumberType:
		return pointerLeaf(t)
	case t.Implements(textMarshalerType):
		return func(v reflect.Value) (string, bool) {
			if isNil(v) {
				return "", false
			}
			b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
			return string(b), err == nil
		}, nil
	case t.Implements(stringerType):
		return func(v reflect.Value) (string, bool) {
			if isNil(v) {
				return "", false
			}
			return v.Interface().(fmt.Stringer).String(), true
		}, nil
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return func(v reflect.Value) (string, bool) { return format(v) }, nil
	case reflect.Pointer:
		return pointerLeaf(t)
	case reflect.Interface:
		return func(v reflect.Value) (string, bool) { return dynamic(v, nil) }, nil
	default:
		return nil, fmt.Errorf("a %s is not a lock name part (use strings, numbers, booleans, or a TextMarshaler or Stringer)", t)
	}
}

// pointerLeaf formats the value a pointer of type t points to; a nil
// pointer is a missing value.
func pointerLeaf(t reflect.Type) (getter, error) {
	next, err := leaf(t.Elem())
	if err != nil {
		return nil, err
	}
	return throughPointer(next), nil
}

// throughPointer applies next to what a pointer points to; a nil pointer
// is a missing value.
func throughPointer(next getter) getter {
	return func(v reflect.Value) (string, bool) {
		if v.IsNil() {
			return "", false
		}
		return next(v.Elem())
	}
}

// isNil reports whether v is a nil pointer or interface, or an interface
// holding a nil pointer: a missing value, whose methods are not called.
func isNil(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Interface:
		return v.IsNil() || isNil(v.Elem())
	case reflect.Pointer:
		return v.IsNil()
	}
	return false
}

// format formats a basic value. Numbers are written in decimal, never with
// an exponent, so that a number names the same lock whatever its Go type:
// 1234567 from an int64, a path value or a float64 (JSON decoded into an
// any) all give "1234567".
func format(v reflect.Value) (string, bool) {
	switch v.Kind() {
	case reflect.String:
		return v.String(), true
	case reflect.Bool:
		return strconv.FormatBool(v.Bool()), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(v.Uint(), 10), true
	case reflect.Float32:
		return formatFloat(v.Float(), 32), true
	case reflect.Float64:
		return formatFloat(v.Float(), 64), true
	}
	return "", false
}

// maxExactInt is 2^53: integers up to it in magnitude are exact in a
// float64.
const maxExactInt = 1 << 53

// formatFloat writes an integral float up to 2^53 in magnitude as the
// integer it is (1234567, not 1.234567e+06; -0 as 0), any other in decimal
// without an exponent (0.5, 1000000000000000000000).
func formatFloat(f float64, bits int) string {
	if f == math.Trunc(f) && math.Abs(f) <= maxExactInt {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'f', -1, bits)
}

// formatJSONNumber formats a json.Number (a decoder's UseNumber) as the
// number it holds would be: "1e6" and "1000000.0" give "1000000", as the
// float64 they decode to otherwise. An integer literal keeps all its
// digits, even past 2^53; text that is no number stays as it is.
func formatJSONNumber(n json.Number) (string, bool) {
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return strconv.FormatInt(i, 10), true
	}
	if isDigits(strings.TrimPrefix(s, "-")) {
		return s, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return formatFloat(f, 64), true
	}
	return s, true
}

// isDigits reports whether s is a non-empty run of ASCII digits.
func isDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// dynamic looks the path up in the value an interface holds, at call time
// (a map[string]any decoded from JSON, an any field).
func dynamic(v reflect.Value, segs []string) (string, bool) {
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "", false
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		return "", false
	}
	g, err := compilePath(v.Type(), segs)
	if err != nil {
		return "", false
	}
	return g(v)
}
