package synchronized_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mutexfx/mutexfx/synchronized"
)

// TestHandleChecksTemplateAgainstPattern: Handle refuses a template field
// that is not a wildcard of the pattern, naming it, and registers one
// whose fields all are.
func TestHandleChecksTemplateAgainstPattern(t *testing.T) {
	t.Parallel()
	m, _ := newMutex(t)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(synchronized.LockFrom(r.Context()).Name()))
	})
	for _, tc := range []struct {
		pattern, tmpl string
		bad           string // the field named by the error; "" when accepted
	}{
		{"/orders/{id}", "order:{idd}", "idd"},
		{"POST /orders/{id}/pay", "order:{id}", ""},
		{"POST example.com/t/{tenant}/orders/{id}", "{tenant}:{id}", ""},
		{"GET /files/{path...}", "file:{path}", ""},
		{"/orders/{id}/{$}", "order:{id}:{$}", "$"},
		{"/orders/{id}", "order:{customer.id}", "customer.id"},
		{"/orders/id", "order:{id}", "id"},
	} {
		t.Run(tc.pattern+" "+tc.tmpl, func(t *testing.T) {
			t.Parallel()
			mux := http.NewServeMux()
			err := synchronized.Handle(mux, tc.pattern, tc.tmpl, ok, synchronized.Options{Mutex: m})
			switch {
			case tc.bad == "" && err != nil:
				t.Fatal(err)
			case tc.bad != "" && !errors.Is(err, synchronized.ErrTemplate):
				t.Fatalf("err %v, want ErrTemplate", err)
			case tc.bad != "" && !strings.Contains(err.Error(), `"`+tc.bad+`"`):
				t.Fatalf("err %v does not name the field %q", err, tc.bad)
			}
		})
	}
	// outer middlewares run before the lock, the first outermost
	var order []string
	outer := func(name string) func(http.Handler) http.Handler {
		return func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if synchronized.LockFrom(r.Context()) != nil {
					t.Errorf("%s ran holding the lock", name)
				}
				order = append(order, name)
				next.ServeHTTP(w, r)
			})
		}
	}
	mux := http.NewServeMux()
	if err := synchronized.Handle(mux, "POST /orders/{id}/pay", "order:{id}", ok, synchronized.Options{Mutex: m}, outer("auth"), outer("trace")); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, body := post(t, srv, "/orders/a:b/pay")
	if resp.StatusCode != http.StatusOK || string(body) != "order:a%3Ab" {
		t.Fatalf("%d %q, want 200 order:a%%3Ab", resp.StatusCode, body)
	}
	if strings.Join(order, ",") != "auth,trace" {
		t.Fatalf("outer middlewares ran %v, want auth, trace", order)
	}
	if err := synchronized.Handle(mux, "POST /orders/{id}/pay", "order:{id}", ok, synchronized.Options{Mutex: m}); err == nil {
		t.Fatal("a conflicting pattern was registered")
	}
}

// TestRouteMismatchIs500: with Middleware, a template field the route does
// not have is answered 500 (E_MUTEX_ROUTE) and logged at error level, not
// 400; an empty value of a wildcard the route has stays a 400.
func TestRouteMismatchIs500(t *testing.T) {
	t.Parallel()
	m, _ := newMutex(t)
	core, obs := observer.New(zapcore.DebugLevel)
	opts := synchronized.Options{Mutex: m, Logger: zap.New(core)}
	ran := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("handler ran") })
	srv := serve(t, "POST /orders/{id}/pay", "order:{idd}", opts, ran)
	resp, body := post(t, srv, "/orders/42/pay")
	if p := problemOf(t, resp, body); p.Status != http.StatusInternalServerError || p.Code != synchronized.CodeRoute {
		t.Fatalf("problem %+v, want 500 %s", p, synchronized.CodeRoute)
	}
	logged := obs.FilterLevelExact(zapcore.ErrorLevel).All()
	if len(logged) != 1 || logged[0].ContextMap()["pattern"] != "POST /orders/{id}/pay" {
		t.Fatalf("error logs %v, want one naming the pattern", logged)
	}

	srv = serve(t, "POST /files/{path...}", "file:{path}", opts, ran)
	resp, body = post(t, srv, "/files/")
	if p := problemOf(t, resp, body); p.Status != http.StatusBadRequest || p.Code != synchronized.CodeLockName {
		t.Fatalf("empty wildcard: problem %+v, want 400 %s", p, synchronized.CodeLockName)
	}
}
