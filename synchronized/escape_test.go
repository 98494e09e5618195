package synchronized_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mutexfx/mutexfx/synchronized"
)

// execute runs tp on values, failing the test on an error.
func execute(t *testing.T, tp *synchronized.Template, values map[string]string) string {
	t.Helper()
	got, err := tp.Execute(func(f string) (string, bool) { v, ok := values[f]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestTemplateEscapesValues(t *testing.T) {
	tests := []struct {
		name   string
		tmpl   string
		values map[string]string
		want   string
	}{
		{"separator in the first value", "{tenant}:{id}", map[string]string{"tenant": "a:b", "id": "c"}, "a%3Ab:c"},
		{"separator in the second value", "{tenant}:{id}", map[string]string{"tenant": "a", "id": "b:c"}, "a:b%3Ac"},
		{"another template's suffix", "order:{id}", map[string]string{"id": "1:refund"}, "order:1%3Arefund"},
		{"percent", "order:{id}", map[string]string{"id": "50%"}, "order:50%25"},
		{"letters of the literal text kept", "order:{id}", map[string]string{"id": "deadbeef"}, "order:deadbeef"},
		{"other characters kept", "order:{id}", map[string]string{"id": "7f3c-a1/x.y"}, "order:7f3c-a1/x.y"},
		{"literal braces", "lit{{{id}}}", map[string]string{"id": "a}b{"}, "lit{a%7Db%7B}"},
		{"non-ASCII literal characters", "élan:{id}:✓", map[string]string{"id": "é✓"}, "élan:%C3%A9%E2%9C%93:✓"},
		{"letter between fields", "{a}x{b}", map[string]string{"a": "x", "b": "xy"}, "%78x%78y"},
		{"invalid UTF-8", "k:{id}", map[string]string{"id": "a\xffb"}, "k:a%FFb"},
		{"percent inside the text between fields", "{a}:%25{b}", map[string]string{"a": "%", "b": "%25"}, "%25:%25%2525"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, err := synchronized.ParseTemplate(tt.tmpl)
			if err != nil {
				t.Fatal(err)
			}
			if got := execute(t, tp, tt.values); got != tt.want {
				t.Fatalf("Execute = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestTemplateInjective: every pair of values up to three characters long,
// over an alphabet of separators, escape characters and hex digits, gives
// a name of its own.
func TestTemplateInjective(t *testing.T) {
	t.Parallel()
	alphabet := []string{":", "-", "%", "2", "5", "x", "A"}
	values := []string{""}
	for range 3 {
		for _, v := range values {
			for _, c := range alphabet {
				values = append(values, v+c)
			}
		}
	}
	values = uniq(values[1:])
	for _, tmpl := range []string{"{a}:{b}", "n:{a}:{b}:", "{a}x{b}", "{a}-%25{b}", "{a}:%{b}%", "{a}A5{b}"} {
		t.Run(tmpl, func(t *testing.T) {
			t.Parallel()
			tp, err := synchronized.ParseTemplate(tmpl)
			if err != nil {
				t.Fatal(err)
			}
			seen := make(map[string][2]string, len(values)*len(values))
			var a, b string
			lookup := func(f string) (string, bool) {
				if f == "a" {
					return a, true
				}
				return b, true
			}
			for _, a = range values {
				for _, b = range values {
					name, err := tp.Execute(lookup)
					if err != nil {
						t.Fatal(err)
					}
					if prev, ok := seen[name]; ok {
						t.Fatalf("%q from (%q, %q) and (%q, %q)", name, prev[0], prev[1], a, b)
					}
					seen[name] = [2]string{a, b}
				}
			}
		})
	}
}

func uniq(vs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// TestMiddlewareEscapesPathValues: two requests for different resources
// whose path values joined by the separator read the same take different
// locks.
func TestMiddlewareEscapesPathValues(t *testing.T) {
	m, _ := newMutex(t)
	mw, err := synchronized.Middleware("{tenant}:{id}", synchronized.Options{Mutex: m})
	if err != nil {
		t.Fatal(err)
	}
	var name string
	mux := http.NewServeMux()
	mux.Handle("POST /t/{tenant}/orders/{id}", mw(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		name = synchronized.LockFrom(r.Context()).Name()
	})))
	tests := []struct {
		path string
		want string
	}{
		{"/t/a:b/orders/c", "a%3Ab:c"},
		{"/t/a/orders/b:c", "a:b%3Ac"},
		{"/t/a%3Ab/orders/c", "a%3Ab:c"}, // the same path value, decoded by the mux
		// values are text: what strconv.Atoi reads as 42 names other locks
		{"/t/a/orders/042", "a:042"},
		{"/t/a/orders/+42", "a:+42"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			name = ""
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, tt.path, nil))
			if rec.Code != http.StatusOK || name != tt.want {
				t.Fatalf("status %d, lock %q; want %q", rec.Code, name, tt.want)
			}
		})
	}
}

// TestTemplatesMeetAcrossRoutes: a template escapes only its own
// separators, so two templates sharing a prefix can give one name (as
// docs/synchronized.md says: give each template its own prefix), while
// templates with their own prefixes never do.
func TestTemplatesMeetAcrossRoutes(t *testing.T) {
	exec := func(tmpl, id string) string {
		tp, err := synchronized.ParseTemplate(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		return execute(t, tp, map[string]string{"id": id})
	}
	if a, b := exec("order:{id}", "1-refund"), exec("order:{id}-refund", "1"); a != b {
		t.Errorf("order:{id} with 1-refund gives %q, order:{id}-refund with 1 %q: the docs say they meet", a, b)
	}
	for _, id := range []string{"1", "1-refund", "refund:1", "1:refund"} {
		if a, b := exec("order:{id}", id), exec("refund:{id}", id); a == b {
			t.Errorf("order:{id} and refund:{id} both give %q for %q", a, id)
		}
		if a := exec("order:{id}", id); a == exec("refund:{id}", "1") {
			t.Errorf("order:{id} with %q gives refund:{id}'s name for 1", id)
		}
	}
}
