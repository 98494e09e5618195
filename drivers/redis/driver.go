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
// slot. A store that may have forgotten locks (restart, flush, fail-over)
// grants nothing for the longest ttl, and fences stay above those given
// before (epoch.go, cluster.go); in Sentinel and Cluster mode writes can
// wait for replicas (Options.MinReplicas). See the package's Options for
// the configuration keys.
package redis

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

// Compile-time checks of the capabilities the driver offers.
var (
	_ kit.Capable        = (*Driver)(nil)
	_ drivers.Handoverer = (*Driver)(nil)
)

// ErrClosed is returned by calls on a closed Driver: it is drivers.ErrClosed.
var ErrClosed = drivers.ErrClosed

// Driver is a lock store on Redis. It is safe for concurrent use.
type Driver struct {
	client   goredis.UniversalClient
	owned    bool // the driver created client and closes it
	cluster  bool
	set      settings
	health   *health
	id       string // waiter id in the stores' queues
	args     fixedArgs
	watchers watchers
	longest  ttlSeen       // the longest ttl asked for (the default restart wait)
	servers  servers       // the server processes seen (detect.go)
	slots    slotChecks    // Cluster: the master process each slot was checked on
	poll     time.Duration // a waiting call's poll interval: WaitPollInterval (tests lengthen it)
	subCheck subCheck      // the Pub/Sub connection's health check: defaultSubCheck (tests shorten it)

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
	var d *Driver
	u.OnConnect = func(ctx context.Context, cn *goredis.Conn) error { return d.onConnect(ctx, cn) }
	var c goredis.UniversalClient
	if opts.Cluster {
		c = clusterClient(u, func(ctx context.Context, cn *goredis.Conn, addr string) error {
			return d.onClusterConnect(ctx, cn, addr)
		})
	} else {
		c = goredis.NewUniversalClient(u) // a *goredis.Client
	}
	d = newDriver(c, true, opts.Cluster, set)
	return d, nil
}

// NewWithClient returns a driver using c, a client the application already
// has. c must be a *goredis.Client (one server, or a Sentinel failover
// client from goredis.NewFailoverClient) or a *goredis.ClusterClient (Redis
// Cluster, including goredis.NewFailoverClusterClient); the driver's scope
// (Features().Scope) is "server" or "cluster" accordingly. Any other
// UniversalClient is refused with an error wrapping ErrOptions:
//
//   - a *goredis.Ring shards keys on the client side over independent
//     servers: a renewal batch or a lock's wake-up message would reach
//     another shard than the lock's keys, and locks would be reported lost;
//   - a *goredis.AutoPipeliner does not tell whether it wraps a Cluster
//     client, which the driver must know to batch renewals per slot; pass
//     the client it wraps (the driver pipelines its own renewals);
//   - other types (wrappers) likewise: pass the go-redis client itself and
//     add behaviour with c.AddHook.
//
// The driver never closes c. Only opts' driver settings (Channel, FenceTTL,
// RenewBatch, RestartWait, MinReplicas, ReplicaTimeout) are read; the
// connection options are c's. MinReplicas 0 means none here, and the
// driver cannot see a new server process on c's connections (the epoch
// markers still apply; see the package's docs). Give c
// ContextTimeoutEnabled so that contexts bound its reads.
func NewWithClient(c goredis.UniversalClient, opts Options) (*Driver, error) {
	cluster, err := clientMode(c)
	if err != nil {
		return nil, err
	}
	set, err := opts.settings()
	if err != nil {
		return nil, err
	}
	return newDriver(c, false, cluster, set), nil
}

// clientMode reports whether c is a Cluster client (true) or a client of
// one server (false), or an error for a client the driver cannot use.
func clientMode(c goredis.UniversalClient) (bool, error) {
	switch c := c.(type) {
	case nil:
		return false, drivers.OptionErrorf("", "nil client")
	case *goredis.Client:
		return false, nilClient(c == nil)
	case *goredis.ClusterClient:
		return true, nilClient(c == nil)
	case *goredis.Ring:
		return false, drivers.OptionErrorf("client", "a *redis.Ring is not supported: it shards keys on the client side over "+
			"independent servers, so renewals and wake-ups would miss the locks' shard; use a *redis.Client "+
			"(one server or Sentinel) or a *redis.ClusterClient (Redis Cluster)")
	case *goredis.AutoPipeliner:
		return false, drivers.OptionErrorf("client", "a *redis.AutoPipeliner is not supported: it does not tell whether it wraps "+
			"a Cluster client; pass the *redis.Client or *redis.ClusterClient it wraps (the driver pipelines its own "+
			"renewals)")
	default:
		return false, drivers.OptionErrorf("client", "a %T is not supported: the driver must know whether it talks to one "+
			"server or a Redis Cluster; pass a *redis.Client or *redis.ClusterClient (add behaviour with AddHook)", c)
	}
}

// nilClient returns the error of a nil client pointer, or nil.
func nilClient(isNil bool) error {
	if isNil {
		return drivers.OptionErrorf("", "nil client")
	}
	return nil
}

func newDriver(c goredis.UniversalClient, owned, cluster bool, set settings) *Driver {
	d := &Driver{client: c, owned: owned, cluster: cluster, set: set, id: rand.Text(), poll: WaitPollInterval, subCheck: defaultSubCheck}
	d.args = newFixedArgs(d)
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.health = newHealth(d)
	return d
}

// fixedArgs are the script arguments that are the same on every call of a
// driver, converted to interface values once: go-redis takes a script's
// arguments as []any, and converting a string or an int64 to any
// allocates, on every acquisition and release.
type fixedArgs struct {
	id         any // d.id, the waiter id
	prefix     any // the channel prefix of the waiters' channels
	live       any // WaiterLiveness in ms
	fenceTTL   any // the fence counter's ttl in ms
	fenceTTLms int64
}

func newFixedArgs(d *Driver) fixedArgs {
	f := ttlMillis(d.set.fenceTTL)
	return fixedArgs{id: d.id, prefix: d.set.channel + ":", live: WaiterLiveness.Milliseconds(), fenceTTL: f, fenceTTLms: f}
}

// fenceTTLFor returns ms (a counter ttl in ms) as an argument, without a
// new conversion when it is the driver's fence ttl.
func (a *fixedArgs) fenceTTLFor(ms int64) any {
	if ms == a.fenceTTLms {
		return a.fenceTTL
	}
	return ms
}

// Features reports expiring locks on the server's clock with fencing, and
// waits in the store (a queue of waiters in Redis, woken by release
// messages).
func (d *Driver) Features() drivers.Features {
	scope := "server"
	if d.cluster {
		scope = "cluster"
	}
	return drivers.Features{Expiring: true, ServerTime: true, Fencing: true, BlockingWait: true, Scope: scope, MinTTL: 250 * time.Millisecond}
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
