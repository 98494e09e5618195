// Package redis is the mutexfx driver for Redis (standalone, Sentinel or
// Cluster; Redis 5+ or Valkey), built on go-redis v9.
//
// Every operation is one Lua script, so one round trip: acquire (set if
// absent with the ttl in the server's clock, fence from a per-name counter
// seeded from the server's clock), release (compare-and-delete; with
// waiters queued, the lock is passed to the first of them in the same
// script and that waiter's process alone is told), extend
// (compare-and-expire) and a batched renewal of many locks (one script per
// Cluster slot, pipelined).
// A lock name and its counter share a hash tag, so every script touches one
// slot. See the package's Options for the configuration keys.
package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
)

// Compile-time checks of the capabilities the driver offers.
var (
	_ drivers.Driver     = (*Driver)(nil)
	_ drivers.Renewer    = (*Driver)(nil)
	_ drivers.Subscriber = (*Driver)(nil)
	_ drivers.Inspector  = (*Driver)(nil)
	_ drivers.Describer  = (*Driver)(nil)
	_ drivers.Handoverer = (*Driver)(nil)
)

// ErrClosed is returned by calls on a closed Driver.
var ErrClosed = errors.New("redis: driver closed")

// Driver is a lock store on Redis. It is safe for concurrent use.
type Driver struct {
	client   goredis.UniversalClient
	owned    bool // the driver created client and closes it
	cluster  bool
	set      settings
	health   *health
	id       string // waiter id in the stores' queues
	watchers watchers

	ctx    context.Context // cancelled by Close; ends the driver's goroutines
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	sub       *subscription
	closeOnce sync.Once
	closeErr  error
}

// New validates opts and returns a driver that connects at its first call.
// Errors wrap ErrOptions and never contain a password.
func New(opts Options) (*Driver, error) {
	set, err := opts.settings()
	if err != nil {
		return nil, err
	}
	u, err := opts.universal()
	if err != nil {
		return nil, err
	}
	return newDriver(goredis.NewUniversalClient(u), true, set), nil
}

// NewWithClient returns a driver using c, a client the application already
// has (a *goredis.Client, *goredis.ClusterClient or failover client). The
// driver never closes c. Only opts' driver settings (Channel, FenceTTL,
// RenewBatch) are read; the connection options are c's. Give c
// ContextTimeoutEnabled so that contexts bound its reads.
func NewWithClient(c goredis.UniversalClient, opts Options) (*Driver, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil client", ErrOptions)
	}
	set, err := opts.settings()
	if err != nil {
		return nil, err
	}
	return newDriver(c, false, set), nil
}

func newDriver(c goredis.UniversalClient, owned bool, set settings) *Driver {
	d := &Driver{client: c, owned: owned, set: set, id: rand.Text()}
	_, d.cluster = c.(*goredis.ClusterClient)
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.health = newHealth(d)
	return d
}

// Features reports expiring locks on the server's clock with fencing, and
// waits in the store (a queue of waiters in Redis, woken by release
// messages).
func (d *Driver) Features() drivers.Features {
	scope := "server"
	if d.cluster {
		scope = "cluster"
	}
	return drivers.Features{Expiring: true, ServerTime: true, Fencing: true, BlockingWait: true, Scope: scope}
}

// Client returns the driver's go-redis client (for diagnostics).
func (d *Driver) Client() goredis.UniversalClient { return d.client }

// Close ends the driver's subscription and goroutines and closes the client
// if the driver created it. It does not release locks. Calls after Close
// fail with ErrClosed. Close is idempotent.
func (d *Driver) Close(ctx context.Context) error {
	d.closeOnce.Do(func() {
		d.mu.Lock()
		d.closed = true
		sub := d.sub
		d.sub = nil
		d.mu.Unlock()
		d.cancel()
		if sub != nil {
			if err := sub.stop(ctx); err != nil {
				d.closeErr = fmt.Errorf("redis: close: subscription: %w", err)
			}
		}
		done := make(chan struct{})
		go func() { d.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			d.closeErr = fmt.Errorf("redis: close: %w", ctx.Err())
		}
		if d.owned {
			if err := d.client.Close(); err != nil && d.closeErr == nil {
				d.closeErr = fmt.Errorf("redis: close: %w", err)
			}
		}
	})
	return d.closeErr
}

func (d *Driver) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// ttlMillis converts a ttl to whole milliseconds, at least 1.
func ttlMillis(ttl time.Duration) int64 {
	ms := ttl.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	return ms
}
