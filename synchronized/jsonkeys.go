package synchronized

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrAmbiguousKey reports a request body that JSONMiddleware refuses
// because the lock name could be read from another value than the handler
// reads: an object on the path of a template field has the field's key
// twice, or spelt in another letter case ({"order_id": 1, "ORDER_ID": 2},
// or {"ORDER_ID": 2} alone). encoding/json, decoding into the handler's
// struct, matches keys ignoring case and keeps the last one, while the
// lock name is read from the key spelt as in the template: 400, code
// E_MUTEX_BODY.
var ErrAmbiguousKey = errors.New("synchronized: a key of the lock name is ambiguous in the request body")

// keyTree holds the template's field paths as a tree: the children of a
// key are the keys read in its value.
type keyTree map[string]keyTree

// newKeyTree builds the tree of the dotted paths fields.
func newKeyTree(fields []string) keyTree {
	root := keyTree{}
	for _, f := range fields {
		node := root
		for seg := range strings.SplitSeq(f, ".") {
			if node[seg] == nil {
				node[seg] = keyTree{}
			}
			node = node[seg]
		}
	}
	return root
}

// checkKeys checks that in body, a JSON object, each object on the path of
// a field has exactly one key equal to the field's segment ignoring case
// (as encoding/json compares keys with struct fields, strings.EqualFold),
// and that this key is spelt as the segment; then the value the lock name
// is built from is the one encoding/json gives the handler, whether it
// decodes into a struct (case-insensitive, the last key winning) or into
// a map (exact keys). An absent key is left to the lookup (ErrLockName).
func checkKeys(body []byte, tree keyTree, path string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil // not an object: the lookup finds no field in it
	}
	type member struct {
		key   string
		value json.RawMessage
	}
	found := make(map[string]member, len(tree))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBody, err)
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return fmt.Errorf("%w: %w", ErrBody, err)
		}
		for seg := range tree {
			if !strings.EqualFold(key, seg) {
				continue
			}
			if prev, ok := found[seg]; ok {
				if prev.key == key {
					return fmt.Errorf("%w: key %q appears twice in %s", ErrAmbiguousKey, key, path)
				}
				return fmt.Errorf("%w: keys %q and %q in %s differ only in case", ErrAmbiguousKey, prev.key, key, path)
			}
			found[seg] = member{key, value}
		}
	}
	for seg, sub := range tree {
		m, ok := found[seg]
		switch {
		case !ok:
		case m.key != seg:
			return fmt.Errorf("%w: key %q in %s is the field %q spelt in another case", ErrAmbiguousKey, m.key, path, seg)
		case len(sub) > 0:
			if err := checkKeys(m.value, sub, path+"."+seg); err != nil {
				return err
			}
		}
	}
	return nil
}
