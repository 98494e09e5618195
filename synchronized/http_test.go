package synchronized_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/file"
	"github.com/mutexfx/mutexfx/internal/testutil"
	"github.com/mutexfx/mutexfx/synchronized"
)

// serve registers h behind the middleware built from tmpl and opts on
// pattern, and returns the server.
func serve(t *testing.T, pattern, tmpl string, opts synchronized.Options, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	mw, err := synchronized.Middleware(tmpl, opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(pattern, mw(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, srv *httptest.Server, path string) (*http.Response, []byte) {
	t.Helper()
	resp, err := srv.Client().Post(srv.URL+path, "text/plain", nil)
	if err != nil {
		t.Error(err)
		return nil, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func problemOf(t *testing.T, resp *http.Response, body []byte) synchronized.Problem {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q", ct)
	}
	var p synchronized.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if p.Status != resp.StatusCode {
		t.Errorf("problem status %d, response %d", p.Status, resp.StatusCode)
	}
	return p
}

// want503 checks an answer of 503 with the problem code and a Retry-After.
func want503(t *testing.T, resp *http.Response, body []byte, code string) {
	t.Helper()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, body %q; want 503", resp.StatusCode, body)
	}
	if p := problemOf(t, resp, body); p.Code != code {
		t.Errorf("code %q, want %q", p.Code, code)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
}

func TestMiddlewareSerialisesSameID(t *testing.T) {
	m, _ := newMutex(t)
	var inflight, most atomic.Int32
	entered, gate := make(chan struct{}, 6), make(chan struct{})
	srv := serve(t, "POST /orders/{id}/pay", "order:{id}", synchronized.Options{Mutex: m}, func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
		}
		if l := synchronized.LockFrom(r.Context()); l == nil || l.Name() != "order:"+r.PathValue("id") {
			t.Errorf("LockFrom = %v", l)
		}
		entered <- struct{}{}
		<-gate // the work the lock protects lasts until the others wait
	})
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if resp, _ := post(t, srv, "/orders/1/pay"); resp != nil && resp.StatusCode != http.StatusOK {
				t.Errorf("status %d", resp.StatusCode)
			}
		})
	}
	<-entered
	// the five other requests queue for the lock, none in the handler
	testutil.Poll(t, 5*time.Second, "five requests waiting for the lock", func() bool { return m.Waiters("order:1") == 5 })
	if n := inflight.Load(); n != 1 {
		t.Errorf("%d requests in the handler while the others wait, want 1", n)
	}
	close(gate)
	wg.Wait()
	if got := most.Load(); got != 1 {
		t.Fatalf("%d requests for one order ran at once, want 1", got)
	}
}

func TestMiddlewareDifferentIDsParallel(t *testing.T) {
	m, _ := newMutex(t)
	var arrived sync.WaitGroup
	arrived.Add(2)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	srv := serve(t, "POST /orders/{id}/pay", "order:{id}", synchronized.Options{Mutex: m}, func(w http.ResponseWriter, r *http.Request) {
		arrived.Done()
		select {
		case <-all: // both requests are inside their handlers at once
		case <-time.After(5 * time.Second):
			w.WriteHeader(http.StatusGatewayTimeout)
		}
	})
	var wg sync.WaitGroup
	for _, id := range []string{"1", "2"} {
		wg.Go(func() {
			if resp, _ := post(t, srv, "/orders/"+id+"/pay"); resp != nil && resp.StatusCode != http.StatusOK {
				t.Errorf("order %s: status %d: the requests did not run in parallel", id, resp.StatusCode)
			}
		})
	}
	wg.Wait()
}

func TestMiddlewareConflict(t *testing.T) {
	tests := []struct {
		name    string
		opts    synchronized.Options
		atLeast time.Duration
	}{
		{"timeout", synchronized.Options{Timeout: 80 * time.Millisecond}, 80 * time.Millisecond},
		{"no wait", synchronized.Options{NoWait: true, Timeout: time.Hour}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newMutex(t)
			held, err := m.TryAcquire(context.Background(), "order:7")
			if err != nil || held == nil {
				t.Fatalf("TryAcquire = %v, %v", held, err)
			}
			tt.opts.Mutex = m
			var called atomic.Bool
			srv := serve(t, "POST /orders/{id}", "order:{id}", tt.opts, func(http.ResponseWriter, *http.Request) { called.Store(true) })
			start := time.Now()
			resp, body := post(t, srv, "/orders/7")
			took := time.Since(start)
			if resp.StatusCode != http.StatusConflict {
				t.Fatalf("status %d, want 409", resp.StatusCode)
			}
			if p := problemOf(t, resp, body); p.Code != synchronized.CodeTimeout {
				t.Errorf("code %q", p.Code)
			}
			if took < tt.atLeast || took > tt.atLeast+2*time.Second {
				t.Errorf("answered after %v, want about %v", took, tt.atLeast)
			}
			if called.Load() {
				t.Error("handler called without the lock")
			}
		})
	}
}

// recorder is a ResponseWriter recording whether anything was written.
type recorder struct {
	h       http.Header
	written atomic.Bool
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) WriteHeader(int)             { r.written.Store(true) }
func (r *recorder) Write(b []byte) (int, error) { r.written.Store(true); return len(b), nil }

func TestMiddlewareClientGoneStopsWait(t *testing.T) {
	m, _ := newMutex(t)
	held, err := m.TryAcquire(context.Background(), "order:9")
	if err != nil || held == nil {
		t.Fatalf("TryAcquire = %v, %v", held, err)
	}
	mw, err := synchronized.Middleware("order:{id}", synchronized.Options{Mutex: m, Timeout: component.Forever})
	if err != nil {
		t.Fatal(err)
	}
	var called atomic.Bool
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called.Store(true) }))
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders/9", nil)
	r.SetPathValue("id", "9")
	w := &recorder{h: http.Header{}}
	done := make(chan struct{})
	go func() { defer close(done); h.ServeHTTP(w, r) }()
	testutil.Poll(t, 5*time.Second, "the request to wait", func() bool { return m.Waiters("order:9") == 1 })
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the wait did not stop when the request's ctx ended")
	}
	if w.written.Load() || called.Load() {
		t.Errorf("written %v, handler called %v; want neither", w.written.Load(), called.Load())
	}
	if n := m.Waiters("order:9"); n != 0 {
		t.Errorf("%d waiters left", n)
	}
}

func TestMiddlewareLostLockCancelsRequest(t *testing.T) {
	m, drv := newMutex(t)
	entered := make(chan *component.Lock, 1)
	cause := make(chan error, 1)
	srv := serve(t, "POST /orders/{id}", "order:{id}", synchronized.Options{Mutex: m}, func(w http.ResponseWriter, r *http.Request) {
		entered <- synchronized.LockFrom(r.Context())
		select {
		case <-r.Context().Done():
			cause <- context.Cause(r.Context())
		case <-time.After(5 * time.Second):
			cause <- errors.New("the request's ctx was not cancelled")
		}
	})
	go post(t, srv, "/orders/3")
	l := <-entered
	if l == nil || l.Name() != "order:3" {
		t.Fatalf("LockFrom = %v", l)
	}
	if !drv.Revoke(component.DefaultPrefix + "order:3") {
		t.Fatal("the lock was not in the store")
	}
	if err := <-cause; !errors.Is(err, component.ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", err)
	}
}

func TestMiddlewarePanicReleases(t *testing.T) {
	m, _ := newMutex(t)
	mw, err := synchronized.Middleware("order:{id}", synchronized.Options{Mutex: m})
	if err != nil {
		t.Fatal(err)
	}
	// net/http's own panic value, which it expects unchanged
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	r := httptest.NewRequest(http.MethodPost, "/orders/5", nil)
	r.SetPathValue("id", "5")
	func() {
		defer func() {
			if p := recover(); p != http.ErrAbortHandler {
				t.Errorf("recovered %v, want the handler's panic http.ErrAbortHandler", p)
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), r)
	}()
	l, err := m.TryAcquire(context.Background(), "order:5")
	if err != nil || l == nil {
		t.Fatalf("lock not released after the panic: %v, %v", l, err)
	}
}

// TestMiddlewareBadName: a name the request cannot give is a 400 without
// the function's error. (A template field absent from the route is a
// server bug, a 500: TestRouteMismatchIs500.)
func TestMiddlewareBadName(t *testing.T) {
	tests := []struct {
		name string
		mw   func(synchronized.Options) (func(http.Handler) http.Handler, error)
	}{
		{"name func error", func(o synchronized.Options) (func(http.Handler) http.Handler, error) {
			return synchronized.MiddlewareFunc(func(*http.Request) (string, error) { return "", errors.New("secret detail") }, o)
		}},
		{"empty name", func(o synchronized.Options) (func(http.Handler) http.Handler, error) {
			return synchronized.MiddlewareFunc(func(*http.Request) (string, error) { return "", nil }, o)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newMutex(t)
			mw, err := tt.mw(synchronized.Options{Mutex: m})
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			mux.Handle("POST /orders/{other}", mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("handler called") })))
			srv := httptest.NewServer(mux)
			defer srv.Close()
			resp, body := post(t, srv, "/orders/1")
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400", resp.StatusCode)
			}
			p := problemOf(t, resp, body)
			if p.Code != synchronized.CodeLockName {
				t.Errorf("code %q", p.Code)
			}
			if p.Detail == "secret detail" {
				t.Error("the name function's error reached the client")
			}
		})
	}
}

func TestMiddlewareStoreFailure(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	drv, err := file.New(file.Options{Dir: filepath.Join(notDir, "locks")})
	if err != nil {
		t.Fatal(err)
	}
	broken, err := component.New(component.Options{Driver: drv, Name: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	defer broken.Close(context.Background())
	closed, _ := newMutex(t)
	if err := closed.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		m    *component.Mutex
		code string
	}{
		{"store error", broken, synchronized.CodeDriver},
		{"closed", closed, synchronized.CodeClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, "POST /orders/{id}", "order:{id}", synchronized.Options{Mutex: tt.m}, func(http.ResponseWriter, *http.Request) { t.Error("handler called") })
			resp, body := post(t, srv, "/orders/1")
			want503(t, resp, body, tt.code)
		})
	}
}

// stores is a Resolver over a map, with a default store.
type stores map[string]*component.Mutex

func (s stores) Get(name string) (*component.Mutex, error) {
	if m, ok := s[name]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("store %q not configured", name)
}

func TestMiddlewareConstructionErrors(t *testing.T) {
	m, _ := newMutex(t)
	tests := []struct {
		name string
		tmpl string
		opts synchronized.Options
		want error
	}{
		{"unclosed brace", "order:{id", synchronized.Options{Mutex: m}, synchronized.ErrTemplate},
		{"empty field", "order:{}", synchronized.Options{Mutex: m}, synchronized.ErrTemplate},
		{"stray brace", "order:}", synchronized.Options{Mutex: m}, synchronized.ErrTemplate},
		{"no store", "order:{id}", synchronized.Options{}, synchronized.ErrNoStore},
		{"unknown store", "order:{id}", synchronized.Options{Resolver: stores{"a": m}, Store: "b"}, synchronized.ErrNoStore},
		{"no default store", "order:{id}", synchronized.Options{Resolver: stores{"a": m}}, synchronized.ErrNoStore},
		{"ttl too short", "order:{id}", synchronized.Options{Mutex: m, TTL: time.Millisecond}, component.ErrInvalidOption},
		{"ttl too long", "order:{id}", synchronized.Options{Mutex: m, TTL: component.MaxTTL + 1}, component.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := synchronized.Middleware(tt.tmpl, tt.opts); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := synchronized.Middleware("order:{id}", synchronized.Options{Resolver: stores{"a": m}, Store: "a"}); err != nil {
		t.Fatalf("resolving a configured store: %v", err)
	}
}
