package mutexfx

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// StoreHealth is the health of one store, as Registry.Check found it.
type StoreHealth struct {
	// Store is the store's name.
	Store string `json:"store"`
	// Checked is false for a store not used yet: stores connect at their
	// first acquisition, and a health check does not make an idle one
	// connect.
	Checked bool `json:"checked"`
	// Err is the store's failure (a *component.DriverError); nil when it
	// answered or was not checked.
	Err error `json:"-"`
	// Error is Err's message, for JSON.
	Error string `json:"error,omitempty"`
}

// Check pings every store this application has used, concurrently, each
// bounded by ctx (see Mutex.Ping): for readiness probes. It returns the
// stores' health, sorted by name, and their failures joined, each naming
// its store (nil when every checked store answered). Errors carry no
// credentials (drivers redact them).
func (r *Registry) Check(ctx context.Context) ([]StoreHealth, error) {
	names := r.Names()
	out := make([]StoreHealth, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			checked, err := r.stores[name].Ping(ctx)
			out[i] = StoreHealth{Store: name, Checked: checked, Err: err}
			if err != nil {
				out[i].Error = err.Error()
			}
		})
	}
	wg.Wait()
	var errs []error
	for _, h := range out {
		if h.Err != nil {
			errs = append(errs, fmt.Errorf("store %q: %w", h.Store, h.Err))
		}
	}
	return out, errors.Join(errs...)
}
