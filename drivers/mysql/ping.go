package mysql

import (
	"context"

	"github.com/mutexfx/mutexfx/drivers"
)

var _ drivers.Pinger = (*Driver)(nil)

// Ping pings the server on one of the pool's connections.
func (d *Driver) Ping(ctx context.Context) error {
	return d.db.PingContext(ctx)
}
