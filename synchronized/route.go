package synchronized

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// ErrRoute reports a lock name template field that the request's route
// cannot supply: the template names a wildcard its ServeMux pattern does
// not have (a typo such as "order:{idd}" on "/orders/{id}"). It is a
// server bug: the middleware
// logs it at error level and answers 500 (code E_MUTEX_ROUTE). Handle
// finds it at registration instead.
var ErrRoute = errors.New("synchronized: a lock name field is not a wildcard of the route")

// Handle registers h on mux at pattern, run holding the lock named by tmpl
// from the request's path values, as Middleware does. Every field of tmpl
// must be a wildcard of pattern ("{id}" or "{id...}"): a field that is not
// fails here with an error wrapping ErrTemplate that names it, rather than
// on every request. A pattern mux refuses (malformed, conflicting) is
// returned as an error too, where mux.Handle panics.
//
// outer are middlewares run before the lock is taken, the first
// outermost: authentication belongs there, so that anonymous requests
// never take or wait for a lock.
func Handle(mux *http.ServeMux, pattern, tmpl string, h http.Handler, opts Options, outer ...func(http.Handler) http.Handler) (err error) {
	t, err := ParseTemplate(tmpl)
	if err != nil {
		return err
	}
	wild := wildcards(pattern)
	for _, f := range t.Fields() {
		if !slices.Contains(wild, f) {
			return fmt.Errorf("%w: field %q of %q is not a wildcard of the pattern %q (its wildcards: %s)",
				ErrTemplate, f, tmpl, pattern, strings.Join(wild, ", "))
		}
	}
	mw, err := Middleware(tmpl, opts)
	if err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("synchronized: pattern %q: %v", pattern, p)
		}
	}()
	h = mw(h)
	for _, o := range slices.Backward(outer) {
		h = o(h)
	}
	mux.Handle(pattern, h)
	return nil
}

// wildcards returns the names of the wildcards of a ServeMux pattern
// ("[METHOD ][HOST]/[PATH]"): "id" for "{id}" and "{id...}"; "{$}" is
// none.
func wildcards(pattern string) []string {
	if i := strings.IndexAny(pattern, " \t"); i >= 0 && !strings.Contains(pattern[:i], "/") {
		pattern = strings.TrimLeft(pattern[i:], " \t") // the method
	}
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		pattern = pattern[i:] // the host
	}
	var out []string
	for seg := range strings.SplitSeq(pattern, "/") {
		name, ok := strings.CutPrefix(seg, "{")
		if !ok {
			continue
		}
		name, ok = strings.CutSuffix(name, "}")
		name = strings.TrimSuffix(name, "...")
		if ok && name != "$" && name != "" {
			out = append(out, name)
		}
	}
	return out
}

// routeFields checks per request that a template's fields are wildcards
// of the request's pattern, each pattern parsed once.
type routeFields struct {
	fields []string
	seen   sync.Map // pattern → error (nil when every field is a wildcard)
}

// check returns an error wrapping ErrRoute when the request's pattern
// lacks a field. A request without a pattern (routed by another router
// that sets path values, or by none) is not checked: its missing fields
// are 400s.
func (c *routeFields) check(r *http.Request) error {
	if r.Pattern == "" {
		return nil // not routed by a ServeMux: another router may set path values
	}
	if v, ok := c.seen.Load(r.Pattern); ok {
		err, _ := v.(error)
		return err
	}
	var err error
	wild := wildcards(r.Pattern)
	for _, f := range c.fields {
		if !slices.Contains(wild, f) {
			err = fmt.Errorf("%w: field %q is not a wildcard of the route %q (wrap the handler registered on the ServeMux, or use Handle)",
				ErrRoute, f, r.Pattern)
			break
		}
	}
	c.seen.Store(r.Pattern, err)
	return err
}
