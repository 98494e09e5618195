package synchronized

import (
	"encoding"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// getter reads one template field from an input value; false when the
// value is missing (nil pointer, absent map key).
type getter func(v reflect.Value) (string, bool)

var (
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	stringerType      = reflect.TypeFor[fmt.Stringer]()
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
		return func(v reflect.Value) (string, bool) {
			if v.IsNil() {
				return "", false
			}
			return next(v.Elem())
		}, nil
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
		f, ok := fieldByName(t, segs[0])
		if !ok {
			return nil, fmt.Errorf("%s has no exported field or json tag %q", t, segs[0])
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

// fieldByName finds an exported field of struct t by Go name, else by json
// tag name.
func fieldByName(t reflect.Type, name string) (reflect.StructField, bool) {
	fields := reflect.VisibleFields(t)
	for _, f := range fields {
		if f.IsExported() && f.Name == name {
			return f, true
		}
	}
	for _, f := range fields {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && tag != "" && tag != "-" && tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// leaf formats a value of type t: strings, booleans and numbers, and types
// implementing encoding.TextMarshaler or fmt.Stringer. Other kinds
// (structs, slices, maps) are refused: their text is no stable lock name.
func leaf(t reflect.Type) (getter, error) {
	switch {
	case t.Implements(textMarshalerType):
		return func(v reflect.Value) (string, bool) {
			if v.Kind() == reflect.Pointer && v.IsNil() {
				return "", false
			}
			b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
			return string(b), err == nil
		}, nil
	case t.Implements(stringerType):
		return func(v reflect.Value) (string, bool) {
			if v.Kind() == reflect.Pointer && v.IsNil() {
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
		next, err := leaf(t.Elem())
		if err != nil {
			return nil, err
		}
		return func(v reflect.Value) (string, bool) {
			if v.IsNil() {
				return "", false
			}
			return next(v.Elem())
		}, nil
	case reflect.Interface:
		return func(v reflect.Value) (string, bool) { return dynamic(v, nil) }, nil
	default:
		return nil, fmt.Errorf("a %s is not a lock name part (use strings, numbers, booleans, or a TextMarshaler or Stringer)", t)
	}
}

// format formats a basic value.
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
		return strconv.FormatFloat(v.Float(), 'g', -1, 32), true
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64), true
	}
	return "", false
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
