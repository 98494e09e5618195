package main

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/mutexfx/mutexfx"
)

// readyz answers readiness probes: 200 when every lock store the service
// has used answers a ping (stores not used yet are not connected by the
// probe), 503 with the failing stores otherwise. Each check is bounded by
// two seconds.
func readyz(reg *mutexfx.Registry) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		health, err := reg.Check(ctx)
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ready": err == nil, "stores": health})
	}
}
