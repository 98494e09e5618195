// Package etcd is the mutexfx driver for etcd v3, built on
// go.etcd.io/etcd/client/v3. Its locks live in a store replicated by
// consensus: the loss of any one member of a three-member cluster neither
// frees a lock nor hands it to a second holder.
//
// The design is that of etcd's client/v3/concurrency: a lock is a queue of
// keys under KeyPrefix + escaped(key) + "/", one per waiting driver, each
// bound to a lease of the driver; the key with the lowest create revision
// holds the lock and its create revision is the fence. A waiter watches
// only the key just before its own, so a release wakes one process. One
// lease per lock ttl (rounded up to whole seconds, plus one) carries every
// key of the driver with that ttl: renewing any number of held locks is one
// keep-alive request per lease, and a lease that cannot be kept alive ends
// all its locks. See Options for the configuration keys.
package etcd

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/connectivity"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

// Compile-time check of the capabilities the driver offers.
var _ kit.Capable = (*Driver)(nil)

// ErrClosed is returned by calls on a closed Driver: it is drivers.ErrClosed.
var ErrClosed = drivers.ErrClosed

// Driver is a lock store on etcd. It is safe for concurrent use.
type Driver struct {
	set  settings
	id   string          // this driver's name in the lock queues
	conf clientv3.Config // holds the password: print.go keeps fmt off it
	opts Options         // as given, for printing (redacted)

	ctx    context.Context // cancelled by Close: ends every call and timer
	cancel context.CancelFunc
	wg     sync.WaitGroup // linger timers at work

	connMu sync.Mutex                      // serialises the first connection
	cli    atomic.Pointer[clientv3.Client] // nil until the first call (when owned)
	owned  bool

	leases leases

	mu      sync.Mutex
	closed  bool
	entries map[string]*entry // by lock key
	subs    kit.Listeners
}

// New validates opts and returns a driver that connects at its first call.
// log receives the etcd client's own logs (nil: none). Errors wrap
// ErrOptions and never contain a password.
func New(opts Options, log *zap.Logger) (*Driver, error) {
	set, err := opts.settings()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	conf, err := opts.config(log.Named("etcd"))
	if err != nil {
		return nil, err
	}
	d := newDriver(set)
	d.conf, d.owned, d.opts = conf, true, opts
	return d, nil
}

// NewWithClient returns a driver using c, a client the application already
// has, which the driver never closes. Only opts' KeyPrefix and WaiterLinger
// apply; connection options must be empty.
func NewWithClient(c *clientv3.Client, opts Options) (*Driver, error) {
	if c == nil {
		return nil, errors.New("etcd: nil client")
	}
	if k := kit.SetKey(opts, connectionKeys...); k != "" {
		return nil, drivers.OptionErrorf(k, "cannot be set with a client")
	}
	set, err := opts.settings()
	if err != nil {
		return nil, err
	}
	d := newDriver(set)
	d.cli.Store(c)
	d.opts = opts
	return d, nil
}

func newDriver(set settings) *Driver {
	d := &Driver{set: set, id: rand.Text(), entries: map[string]*entry{}}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.leases.byTTL = map[int64]*lease{}
	d.leases.gone = d.leaseGone
	return d
}

// Features: expiring locks (leases, in the leader's clock), fencing by
// create revision, waits that block in the store (a watch), shared by the
// whole cluster.
func (d *Driver) Features() drivers.Features {
	return drivers.Features{Expiring: true, ServerTime: true, Fencing: true, BlockingWait: true, Scope: "cluster", MinTTL: MinTTL}
}

// Client returns the etcd client, connecting it on first use.
func (d *Driver) Client(ctx context.Context) (*clientv3.Client, error) {
	if c := d.cli.Load(); c != nil {
		return c, nil
	}
	d.connMu.Lock()
	defer d.connMu.Unlock()
	if d.ctx.Err() != nil {
		return nil, ErrClosed
	}
	if c := d.cli.Load(); c != nil {
		return c, nil
	}
	conf := d.conf
	conf.Context = d.ctx
	c, err := clientv3.New(conf)
	if err != nil {
		if d.ctx.Err() != nil {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("etcd: connect: %w", err)
	}
	if err := ready(ctx, d.ctx, c, d.conf.DialTimeout); err != nil {
		_ = c.Close()
		return nil, err
	}
	d.cli.Store(c)
	return c, nil
}

// ready waits until c's connection is up, for at most timeout, while ctx
// and life last: a cluster that cannot be reached fails the first call
// after the dial timeout instead of leaving it waiting.
func ready(ctx, life context.Context, c *clientv3.Client, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := context.AfterFunc(life, cancel)
	defer stop()
	conn := c.ActiveConnection()
	conn.Connect()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if !conn.WaitForStateChange(wctx, st) {
			if life.Err() != nil {
				return ErrClosed
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			return fmt.Errorf("etcd: no endpoint reachable within the dial timeout (%v)", timeout)
		}
	}
	return nil
}

// call returns the client and a context for one call: ctx, also ended by
// Close.
func (d *Driver) call(ctx context.Context) (*clientv3.Client, context.Context, context.CancelFunc, error) {
	if d.ctx.Err() != nil {
		return nil, nil, nil, ErrClosed
	}
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(d.ctx, cancel)
	done := func() { stop(); cancel() }
	c, err := d.Client(cctx)
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	return c, cctx, done, nil
}

// closedErr returns ErrClosed in place of err once the driver is closed.
func (d *Driver) closedErr(err error) error {
	if err != nil && d.ctx.Err() != nil {
		return ErrClosed
	}
	return err
}

// Close stops the driver: calls under way end with ErrClosed, and the
// driver's leases are revoked (within ctx), which deletes its keys: waiters'
// places and any lock still held (the component releases its locks before
// it closes the driver). A client given to NewWithClient stays open.
func (d *Driver) Close(ctx context.Context) error {
	if !kit.CloseOnce(&d.mu, &d.closed, func() {
		d.subs.Clear()
		for _, e := range d.entries {
			e.stopLinger()
		}
	}) {
		return nil
	}

	// The leases first, then the client: a lease granted before they are
	// taken was granted on a client already loaded here.
	all := d.leases.close()
	cli := d.cli.Load()
	var err error
	if cli != nil {
		err = revoke(ctx, cli, all)
	}
	d.cancel()
	d.wg.Wait()
	d.connMu.Lock() // a first connection under way has ended (d.ctx)
	cli = d.cli.Load()
	d.connMu.Unlock()
	if d.owned && cli != nil {
		if cerr := cli.Close(); cerr != nil && !errors.Is(cerr, context.Canceled) {
			err = errors.Join(err, cerr)
		}
	}
	return err
}
