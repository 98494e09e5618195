package synchronized

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode"
)

// jsonField finds the field of struct t that encoding/json decodes the key
// name into, by its rules: a field's key is its json tag name, else its Go
// name; fields of embedded structs without a tag name are promoted; "-"
// hides a field. Of the fields with that key, the shallowest wins, and at
// equal depth the only tagged one; otherwise the key is ambiguous (json
// ignores it) and jsonField fails. The field's Index is its path from t.
// found is false when no field has that key, or when the winner is an
// unexported embedded field (whose value cannot be read).
func jsonField(t reflect.Type, name string) (f reflect.StructField, found bool, err error) {
	type level struct {
		typ   reflect.Type
		index []int
	}
	current := []level{{t, nil}}
	visited := map[reflect.Type]bool{}
	for len(current) > 0 {
		var next []level
		var matches []reflect.StructField
		var tagged int
		for _, l := range current {
			visited[l.typ] = true
		}
		for _, l := range current {
			for i := range l.typ.NumField() {
				sf := l.typ.Field(i)
				ft := sf.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if sf.Anonymous && !sf.IsExported() && ft.Kind() != reflect.Struct || !sf.Anonymous && !sf.IsExported() {
					continue // unexported, or embedded unexported non-struct
				}
				if sf.Tag.Get("json") == "-" {
					continue
				}
				tagName := jsonTagName(sf)
				sf.Index = append(slices.Clone(l.index), i)
				if tagName == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
					if !visited[ft] {
						next = append(next, level{ft, sf.Index})
					}
					continue
				}
				key := tagName
				if key == "" {
					key = sf.Name
				}
				if key == name {
					matches = append(matches, sf)
					if tagName != "" {
						tagged++
					}
				}
			}
		}
		switch {
		case len(matches) == 1:
			return matches[0], matches[0].IsExported(), nil
		case len(matches) > 1 && tagged == 1:
			i := slices.IndexFunc(matches, func(m reflect.StructField) bool { return jsonTagName(m) != "" })
			return matches[i], matches[i].IsExported(), nil
		case len(matches) > 1:
			return reflect.StructField{}, false, fmt.Errorf("json key %q is ambiguous in %s: %d fields at the same depth (encoding/json ignores them)", name, t, len(matches))
		}
		current = next
	}
	return reflect.StructField{}, false, nil
}

// jsonTagName returns the name of sf's json tag, "" when it has none or
// one encoding/json does not accept.
func jsonTagName(sf reflect.StructField) string {
	name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
	if !validJSONTag(name) {
		return ""
	}
	return name
}

// validJSONTag reports whether encoding/json accepts s as a tag name.
func validJSONTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
