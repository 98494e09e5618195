package postgres

import (
	"context"

	"github.com/mutexfx/mutexfx/drivers"
)

var _ drivers.Pinger = (*Driver)(nil)

// Ping pings the server on one of the pool's connections. Before the pool
// exists (the driver connects at its first call) there is nothing to
// check: it returns nil.
func (d *Driver) Ping(ctx context.Context) error {
	d.poolMu.Lock()
	p := d.pool
	d.poolMu.Unlock()
	if p == nil {
		return nil
	}
	return p.Ping(ctx)
}
