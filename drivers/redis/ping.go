package redis

import (
	"context"

	"github.com/mutexfx/mutexfx/drivers"
)

var _ drivers.Pinger = (*Driver)(nil)

// Ping sends PING to the server (in a Cluster, to the node of one slot;
// with Sentinel, to the current master).
func (d *Driver) Ping(ctx context.Context) error {
	return d.client.Ping(ctx).Err()
}
