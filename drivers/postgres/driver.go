package postgres

import (
	"context"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
	"github.com/mutexfx/mutexfx/internal/backoff"
	"github.com/mutexfx/mutexfx/internal/redact"
)

// ErrClosed is returned by calls on a closed Driver: it is drivers.ErrClosed.
var ErrClosed = drivers.ErrClosed

// Driver keeps locks in PostgreSQL, as advisory locks (ModeAdvisory,
// advisory*.go) or as rows of a table (ModeTable, table*.go), as
// Options.Mode picks. Both are safe for concurrent use. A capability of one
// mode only is found by type assertion: drivers.Lister (table mode).
type Driver interface {
	drivers.SQLDriver
	drivers.Handoverer
	// Mode returns the driver's mode, ModeAdvisory or ModeTable.
	Mode() string
}

// New returns a Driver for opts. It validates them and connects nothing: the
// first call does.
func New(opts Options) (Driver, error) {
	opts = opts.withDefaults()
	n, err := opts.validate()
	var cfg *pgxpool.Config
	if err == nil {
		cfg, err = opts.poolConfig()
	}
	if err != nil {
		return nil, err
	}
	b := newBase(opts, n, cfg.ConnConfig)
	cfg.ConnConfig.DialFunc = b.lifeDial(cfg.ConnConfig.DialFunc)
	return b.build(cfg, nil), nil
}

// NewWithPool returns a Driver using pool, which it never closes. Table mode
// runs its statements on the pool. Advisory mode (and every subscription's
// LISTEN connection) opens its own connections with pool.Config().ConnConfig:
// they do not count against the pool's MaxConns, and its BeforeConnect and
// AfterConnect hooks do not run for them. Connection fields of opts (URL,
// Host, ...) must be empty.
func NewWithPool(pool *pgxpool.Pool, opts Options) (Driver, error) {
	if pool == nil {
		return nil, drivers.OptionErrorf("", "nil pool")
	}
	if kit.SetKey(opts, connectionKeys...) != "" || opts.TLS != nil {
		return nil, drivers.OptionErrorf("", "connection options are not used with an existing pool")
	}
	opts = opts.withDefaults()
	n, err := opts.validate()
	if err != nil {
		return nil, err
	}
	return newBase(opts, n, pool.Config().ConnConfig).build(nil, pool), nil
}

// build returns the driver of b's mode: in table mode on the pool built
// from cfg, or on pool, the application's, whose sessions it leaves alone
// (synchronousCommit is set per transaction, not at startup).
func (b *base) build(cfg *pgxpool.Config, pool *pgxpool.Pool) Driver {
	if b.opts.Mode == ModeAdvisory {
		return newAdvisory(b)
	}
	return newTable(b, cfg, pool)
}

// Factory returns the "postgres" driver factory. Its configuration keys are
// Options' koanf tags; with driver.client naming a *pgxpool.Pool, the
// connection keys must be absent. Each invalid option is a *config.Error at
// its full key path ("mutex.orders.driver.mode: ...") that also wraps
// ErrOptions, as the errors of New do.
func Factory() drivers.Factory {
	f := kit.NewFactory("a *pgxpool.Pool", New, NewWithPool)
	f.ConnectionKeys, f.ClientOptions = connectionKeys, "the pool's own configuration applies"
	return f.Of("postgres")
}

// connectionKeys are the keys of the connection options, in the order
// errors name them.
var connectionKeys = []string{"url", "host", "port", "database", "username", "password", "sslMode"}

// base is what both drivers share.
type base struct {
	// A Driver prints, marshals and logs as its Options do, and nothing
	// else: its connection configurations hold the password.
	redact.Owner

	opts    Options
	names   names
	connCfg *pgx.ConnConfig // pinned and LISTEN connections
	bootKey string          // marks, in a connection's CustomData, that bootCheck passed
	boot    string          // the bootCheck statement

	ddl    sqlkit.Schema
	schema []schemaObject // what ensureSchema creates

	mu        sync.Mutex     // Close's detach runs under it
	subs      kit.Listeners  // added under mu while open, cleared by Close
	listening bool           // the LISTEN goroutine started (under mu)
	listener  sync.WaitGroup // the LISTEN goroutine, until Close starts
	channels  []string       // what the LISTEN connection listens on

	// Close must not wait for a statement stuck on a stalled link, nor for
	// pgx cancelling one (up to 15 s): statements end with the life
	// (life.Bind), and the owned pool's connections, pgx's cancel ones
	// too, close with it (lifeDial, conns).
	life  sqlkit.Life
	conns sqlkit.Conns
}

func newBase(opts Options, n names, cc *pgx.ConnConfig) *base {
	b := &base{Owner: redact.Owner{Name: "postgres.Driver", Options: opts}, opts: opts, names: n, connCfg: cc, bootKey: "mutexfx.boot:" + n.boot, boot: bootCheckSQL(n),
		schema: baseSchema(n), channels: []string{n.channel}}
	b.life.Init()
	return b
}

// Mode returns the driver's mode, ModeAdvisory or ModeTable.
func (b *base) Mode() string { return b.opts.Mode }

// lifeDial wraps dial: connections fail to open once the driver's life has
// ended, and those open then are closed (Close cuts b.conns).
func (b *base) lifeDial(dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, stop := b.life.Bind(ctx)
		defer stop()
		c, err := b.conns.Dial(ctx, dial, network, addr, nil)
		if err != nil {
			if context.Cause(ctx) == ErrClosed {
				return nil, ErrClosed
			}
			return nil, err
		}
		return c, nil
	}
}

// shutdown is Close: it marks the driver closed, then, under b.mu, ends
// the subscriptions and calls detach (the driver forgets what it holds),
// stops the LISTEN goroutine and calls release (the driver closes its
// connections); calls in flight are cut when ctx ends. A second call waits
// for the first.
func (b *base) shutdown(ctx context.Context, detach func(), release func(context.Context) error) error {
	return b.life.Close(ctx, "postgres", func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.subs.Clear()
		detach()
	}, func(ctx context.Context) error {
		b.listener.Wait() // (no goroutine starts once closed)
		return release(ctx)
	}, b.conns.Cut)
}

// Subscribe calls fn with a Released event for every release notified on
// the channel (by any driver on the database) or, in table mode, on the
// driver's own (where a release notifies the first driver queued for the
// row), and a Lost event for every advisory lock whose connection broke.
// The LISTEN connection is opened in the background and reopened after a
// failure (backoff.Default, reset after a connection that lasted a
// minute): Subscribe never fails for an unreachable server or a pooler
// refusing LISTEN (waiters then poll). Keys longer than 7999 bytes are
// released unnotified; in advisory mode only with MaxSessions 1 do
// releases notify (otherwise waiters wait in the server).
func (b *base) Subscribe(ctx context.Context, fn func(drivers.Event)) (func(), error) {
	b.mu.Lock() // Close's detach clears subs under it
	defer b.mu.Unlock()
	if err := b.life.Check(ctx); err != nil {
		return nil, err
	}
	remove := b.subs.Add(fn)
	b.startListenerLocked()
	return func() { remove() }, nil
}

// startListenerLocked starts, with b.mu held, the LISTEN goroutine shared
// by the subscriptions and the waiting acquisitions, unless it runs or the
// driver is closed. It ends when Close starts.
func (b *base) startListenerLocked() {
	if b.life.Closed() || b.listening {
		return
	}
	b.listening = true
	b.listener.Go(func() {
		ctx, retry := b.life.Closing(), backoff.Default.New()
		for {
			start := time.Now()
			b.listenOnce(ctx)
			if time.Since(start) > time.Minute {
				retry.Reset()
			}
			if ctx.Err() != nil || !backoff.Sleep(ctx, retry.Next()) {
				return
			}
		}
	})
}

// listenOnce connects, listens and delivers notifications to the
// subscribers (table mode's waiting acquisitions among them) until the
// connection fails or ctx ends.
func (b *base) listenOnce(ctx context.Context) {
	conn, err := pgx.ConnectConfig(ctx, b.connCfg)
	if err != nil {
		return
	}
	defer func() { _ = conn.Close(context.Background()) }()
	// one round trip (without arguments, Exec sends the simple protocol)
	if _, err := conn.Exec(ctx, sessionSetup+"; LISTEN "+strings.Join(b.channels, "; LISTEN ")); err != nil {
		return
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return
		}
		if n.Payload != "" {
			b.subs.Publish(drivers.Event{Kind: drivers.Released, Key: n.Payload})
		}
	}
}
