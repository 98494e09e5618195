package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/synchronized"
)

// Server is the HTTP server.
type Server struct {
	srv  *http.Server
	addr net.Addr
}

// Addr returns the address it listens on, once started.
func (s *Server) Addr() string { return s.addr.String() }

// NewServer routes the endpoints: each order's payment and refund run
// holding the lock "order:{id}" of the default store, after authentication;
// GET /readyz checks the lock stores (ready.go); GET /metrics serves the
// metrics for Prometheus (metrics.go).
func NewServer(lc fx.Lifecycle, s Settings, o *Orders, m *mutexfx.Mutex, reg *mutexfx.Registry, metrics *MetricsHandler, log *zap.Logger) (*Server, error) {
	// Payments wait up to the store's timeout (5 s in config.yaml) for the
	// order's lock; refunds give up at once while a payment runs.
	// synchronized.Handle checks at start that "{id}" is a wildcard of
	// each pattern.
	mux := http.NewServeMux()
	if err := synchronized.Handle(mux, "POST /orders/{id}/pay", "order:{id}", action(o.Pay),
		synchronized.Options{Mutex: m, Logger: log}, authenticate); err != nil {
		return nil, err
	}
	if err := synchronized.Handle(mux, "POST /orders/{id}/refund", "order:{id}", action(o.Refund),
		synchronized.Options{Mutex: m, Logger: log, NoWait: true}, authenticate); err != nil {
		return nil, err
	}

	mux.Handle("GET /readyz", readyz(reg))
	mux.Handle("GET /metrics", metrics)

	srv := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: zap.NewStdLog(log)}}
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			ln, err := net.Listen("tcp", s.Addr)
			if err != nil {
				return err
			}
			srv.addr = ln.Addr()
			log.Info("orders listening", zap.String("addr", srv.Addr()))
			go func() { _ = srv.srv.Serve(ln) }() // ends at Shutdown
			return nil
		},
		OnStop: srv.srv.Shutdown,
	})
	return srv, nil
}

// authenticate is a stand-in for real authentication: it wants the header
// "Authorization: Bearer demo". The lock middleware comes after it, so that
// anonymous requests never take (or wait for) a lock.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer demo" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// result is the JSON answer of the order endpoints.
type result struct {
	Order string `json:"order"`
	Done  bool   `json:"done"` // charged, refunded; false when nothing was to do
	Lock  string `json:"lock"`
	Fence uint64 `json:"fence"` // the lock's fencing token
}

// action adapts an order operation to an HTTP handler run under the lock.
func action(op func(ctx context.Context, id string) (bool, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		done, err := op(r.Context(), id)
		switch {
		case errors.Is(err, errNotFound):
			http.Error(w, "no such order", http.StatusNotFound)
			return
		case errors.Is(err, mutexfx.ErrLost):
			http.Error(w, "lock lost, try again", http.StatusServiceUnavailable)
			return
		case err != nil:
			return // the client left
		}
		l := synchronized.LockFrom(r.Context())
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(result{Order: id, Done: done, Lock: l.Name(), Fence: l.Fence()})
	})
}
