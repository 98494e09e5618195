package config

import (
	"reflect"
	"slices"
	"strings"
	"time"
)

// unknownKey is the error of an unknown key at path: it suggests the
// nearest of the known keys, when one is near, and lists them all.
func unknownKey(path, key string, known []string) error {
	list := strings.Join(known, ", ")
	if s := Nearest(key, known); s != "" {
		return Errorf(path, "unknown key: did you mean %q? (known: %s)", s, list)
	}
	if list == "" {
		return Errorf(path, "unknown key (this block takes no keys)")
	}
	return Errorf(path, "unknown key (known: %s)", list)
}

// Nearest returns the key of known that key most likely means, or "" when
// none is near: keys are compared in lower case without '_' and '-' (so
// that dial_timeout means dialTimeout), by the number of letters to insert,
// delete, change or swap, which must be at most a third of the key's
// length (at least one). Of two equally near keys, the first in known wins.
func Nearest(key string, known []string) string {
	k := fold(key)
	best, bestDist := "", max(1, len(k)/3)+1
	for _, c := range known {
		if d := distance(k, fold(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

func fold(s string) string {
	return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
}

// distance is the optimal string alignment distance of a and b: the edits
// (insertion, deletion, change, swap of two neighbours) that make b of a.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// three rows: the one before the previous (for swaps), the previous,
	// the current
	prev2, prev, cur := make([]int, len(rb)+1), make([]int, len(rb)+1), make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// keysOf returns the keys a struct decodes (its fields' koanf tags, and
// those of nested structs as "outer.inner"), sorted, for errors.
func keysOf(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]() {
			for _, sub := range keysOf(ft) {
				keys = append(keys, name+"."+sub)
			}
			continue
		}
		keys = append(keys, name)
	}
	slices.Sort(keys)
	return keys
}
