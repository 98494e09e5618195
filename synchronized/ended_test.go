package synchronized_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/synchronized"
)

// TestMiddlewareRequestEnded: a request whose ctx ends during the wait for
// another reason than its client leaving — an upstream middleware's
// deadline around the mux, a cancellation with a cause — gets a 503 problem
// (never a 200 with nothing written), and the handler does not run.
func TestMiddlewareRequestEnded(t *testing.T) {
	shutdown := errors.New("shutting down")
	tests := []struct {
		name     string
		upstream func(context.Context) (context.Context, context.CancelFunc)
	}{
		{"deadline", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 50*time.Millisecond)
		}},
		{"deadline with a cause", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeoutCause(ctx, 50*time.Millisecond, errors.New("request budget spent"))
		}},
		{"cancelled with a cause", func(ctx context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancelCause(ctx)
			cancel(shutdown)
			return ctx, func() {}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newMutex(t)
			held, err := m.TryAcquire(context.Background(), "order:4")
			if err != nil || held == nil {
				t.Fatalf("TryAcquire = %v, %v", held, err)
			}
			var handlerErr atomic.Value
			mw, err := synchronized.Middleware("order:{id}", synchronized.Options{Mutex: m, Timeout: component.Forever,
				ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
					handlerErr.Store(err)
					synchronized.WriteProblem(w, r, err)
				}})
			if err != nil {
				t.Fatal(err)
			}
			var called atomic.Bool
			mux := http.NewServeMux()
			mux.Handle("POST /orders/{id}/pay", mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called.Store(true) })))
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ctx, cancel := tt.upstream(r.Context())
				defer cancel()
				mux.ServeHTTP(w, r.WithContext(ctx))
			}))
			defer srv.Close()

			resp, body := post(t, srv, "/orders/4/pay")
			if resp == nil {
				return
			}
			want503(t, resp, body, synchronized.CodeRequestEnded)
			if called.Load() {
				t.Error("handler called without the lock")
			}
			if err, _ := handlerErr.Load().(error); !errors.Is(err, synchronized.ErrRequestEnded) {
				t.Errorf("ErrorHandler got %v, want ErrRequestEnded", err)
			}
			if n := m.Waiters("order:4"); n != 0 {
				t.Errorf("%d waiters left", n)
			}
		})
	}
}

// hungStore never answers an acquisition: it blocks until the attempt's ctx
// ends. Release, Extend and Close answer at once.
type hungStore struct{}

func (hungStore) Acquire(ctx context.Context, _ drivers.AcquireRequest) (drivers.AcquireResult, error) {
	<-ctx.Done()
	return drivers.AcquireResult{}, ctx.Err()
}
func (hungStore) Release(context.Context, string, string) (bool, error) { return false, nil }
func (hungStore) Extend(context.Context, string, string, time.Duration) (bool, error) {
	return false, nil
}
func (hungStore) Close(context.Context) error { return nil }

// TestMiddlewareHungStore: a store that does not answer within the
// attempt's grace is a failing store, 503 with Retry-After (E_MUTEX_DRIVER),
// not a lock held by another request (409).
func TestMiddlewareHungStore(t *testing.T) {
	t.Parallel()
	m, err := component.New(component.Options{Driver: hungStore{}, Name: "hung"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	srv := serve(t, "POST /orders/{id}", "order:{id}", synchronized.Options{Mutex: m, Timeout: 10 * time.Millisecond},
		func(http.ResponseWriter, *http.Request) { t.Error("handler called") })
	resp, body := post(t, srv, "/orders/1")
	if resp == nil {
		return
	}
	want503(t, resp, body, synchronized.CodeDriver)
}

func TestProblemOf(t *testing.T) {
	derr := &component.DriverError{Store: "orders", Op: "acquire", Lock: "order:1", Err: context.DeadlineExceeded}
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"lock held", fmt.Errorf("%w: %q not acquired within 1s", component.ErrTimeout, "order:1"), http.StatusConflict, synchronized.CodeTimeout},
		{"no answer from the store", fmt.Errorf("%w: %q: no answer from the store after 1s: %w", component.ErrTimeout, "order:1", derr), http.StatusServiceUnavailable, synchronized.CodeDriver},
		{"store failed", derr, http.StatusServiceUnavailable, synchronized.CodeDriver},
		{"closed", component.ErrClosed, http.StatusServiceUnavailable, synchronized.CodeClosed},
		{"bad name", fmt.Errorf("%w: %w", synchronized.ErrLockName, component.ErrEmptyName), http.StatusBadRequest, synchronized.CodeLockName},
		{"name too long", fmt.Errorf("%w: 1030 bytes", component.ErrNameTooLong), http.StatusBadRequest, synchronized.CodeLockName},
		{"request ended", fmt.Errorf("%w: %w", synchronized.ErrRequestEnded, context.DeadlineExceeded), http.StatusServiceUnavailable, synchronized.CodeRequestEnded},
		{"other", errors.New("boom"), http.StatusInternalServerError, synchronized.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := synchronized.ProblemOf(tt.err)
			if p.Status != tt.status || p.Code != tt.code || p.Title != http.StatusText(tt.status) {
				t.Fatalf("ProblemOf = %+v; want %d %s", p, tt.status, tt.code)
			}
			w := httptest.NewRecorder()
			synchronized.WriteProblem(w, httptest.NewRequest(http.MethodPost, "/", nil), tt.err)
			if got := w.Header().Get("Retry-After") != ""; got != (tt.status == http.StatusServiceUnavailable) {
				t.Errorf("status %d with Retry-After %v", w.Code, got)
			}
		})
	}
}
