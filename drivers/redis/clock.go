package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

var _ drivers.ServerClock = (*Driver)(nil)

// ServerTime returns the server's clock (TIME, microseconds), the clock
// the locks' expiries use; in Cluster mode, that of the node go-redis
// picks. It connects at first use like the driver's other calls.
func (d *Driver) ServerTime(ctx context.Context) (time.Time, error) {
	if d.isClosed() {
		return time.Time{}, ErrClosed
	}
	t, err := d.client.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("redis: time: %w", permanent(d.explain(err)))
	}
	return t, nil
}
