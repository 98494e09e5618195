package synchronized

import (
	"context"
	"errors"
	"fmt"
	"go.uber.org/zap"
	"net/http"

	"github.com/mutexfx/mutexfx/component"
)

// Middleware returns net/http middleware that runs the next handler holding
// the lock named by tmpl, whose fields are the request's path values
// (r.PathValue): "order:{id}" with the pattern "POST /orders/{id}/pay".
// Wrap the handler registered on the http.ServeMux (not the mux itself:
// outside it, path values are unset), after the authentication middleware.
// Path values are escaped as Template describes, so that different
// requests never share a name: under "{tenant}:{id}", /t/a:b/orders/c locks
// "a%3Ab:c" and /t/a/orders/b:c locks "a:b%3Ac".
//
// A malformed tmpl, Options naming no store or a TTL the store cannot
// serve, fail here; Handle also
// checks tmpl's fields against the route's pattern. Per request:
//   - a field that is not a wildcard of the request's pattern: 500 (code
//     E_MUTEX_ROUTE), logged at error level (a server bug, see ErrRoute);
//   - a field missing or empty, or values making a name longer than the
//     store takes (component.ErrNameTooLong): 400 (code E_MUTEX_LOCK_NAME);
//   - the lock not acquired in time (or held, with NoWait): 409
//     (E_MUTEX_TIMEOUT);
//   - the store failing, not answering in time, or closed: 503
//     (E_MUTEX_DRIVER, E_MUTEX_CLOSED) with Retry-After: 1;
//   - the client going away during the wait (the request's ctx cancelled
//     without a cause, as net/http does then): the wait stops and nothing
//     is written. An application that cancels request contexts itself
//     must give a cause: without one, the handler returns unwritten and
//     net/http answers a client still there 200 with an empty body;
//   - the request's ctx ending for another reason during the wait — a
//     deadline set by an upstream middleware (context.WithTimeout,
//     http.TimeoutHandler), a cancellation with a cause: 503
//     (E_MUTEX_REQUEST_ENDED) with Retry-After: 1. The handler has not
//     run; the client may retry.
//
// The handler's request ctx carries the lock (LockFrom) and is cancelled,
// with a cause wrapping component.ErrLost, when the lock is lost. The lock
// is released when the handler returns or panics.
func Middleware(tmpl string, opts Options) (func(http.Handler) http.Handler, error) {
	t, err := ParseTemplate(tmpl)
	if err != nil {
		return nil, err
	}
	route := &routeFields{fields: t.Fields()}
	return MiddlewareFunc(func(r *http.Request) (string, error) {
		if err := route.check(r); err != nil {
			return "", err
		}
		return t.Execute(func(field string) (string, bool) {
			v := r.PathValue(field)
			return v, v != ""
		})
	}, opts)
}

// MiddlewareFunc is Middleware with the lock name computed by name. An error
// from name (or an empty name, or one longer than the store takes)
// answers 400 (E_MUTEX_LOCK_NAME); the error text is not sent to the
// client.
func MiddlewareFunc(name func(r *http.Request) (string, error), opts Options) (func(http.Handler) http.Handler, error) {
	if name == nil {
		return nil, fmt.Errorf("%w: nil name function", ErrTemplate)
	}
	l, err := opts.locker()
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		return &handler{l: l, name: name, next: next}
	}, nil
}

// ErrRequestEnded reports, to Options.ErrorHandler, a request whose ctx
// ended during the wait for the lock for another reason than its client
// going away: a deadline (an upstream middleware's timeout) or a
// cancellation with a cause. It wraps the wait's error (the ctx's cause).
var ErrRequestEnded = errors.New("synchronized: the request's context ended before the lock was acquired")

// clientGone reports whether the ended ctx of a request says that its
// client went away: net/http then cancels it without a cause (Canceled is
// its cause). A deadline, or a cancellation with a cause of its own, comes
// from the application and gets an answer.
func clientGone(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.Canceled) && context.Cause(ctx) == context.Canceled
}

type handler struct {
	l    *locker
	name func(*http.Request) (string, error)
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, err := h.name(r)
	if err == nil && name == "" {
		err = component.ErrEmptyName
	}
	switch {
	case errors.Is(err, ErrRoute):
		h.l.log.Error("lock name template does not fit the route: a server bug, answered 500",
			zap.String("method", r.Method), zap.String("pattern", r.Pattern), zap.Error(err))
		h.l.onErr(w, r, err)
		return
	case errors.Is(err, ErrBodyTooLarge), errors.Is(err, ErrBody):
		h.l.onErr(w, r, err)
		return
	case err != nil:
		h.l.onErr(w, r, fmt.Errorf("%w: %w", ErrLockName, err))
		return
	}
	ctx := r.Context()
	lock, err := h.l.acquire(ctx, name)
	if err != nil {
		if ctx.Err() != nil {
			if clientGone(ctx) {
				return // nobody reads an answer
			}
			err = fmt.Errorf("%w: %w", ErrRequestEnded, err)
		}
		h.l.onErr(w, r, err)
		return
	}
	_ = component.Run(ctx, lock, func(lctx context.Context, _ *component.Lock) error {
		h.next.ServeHTTP(w, r.WithContext(lctx))
		return nil
	})
}
