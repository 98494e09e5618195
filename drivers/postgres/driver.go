package postgres

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
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

// Driver keeps locks in PostgreSQL, as advisory locks (ModeAdvisory) or as
// rows of a table (ModeTable), as Options.Mode picks. Both are safe for
// concurrent use. Table mode alone is a drivers.Lister.
type Driver interface {
	drivers.SQLDriver
	drivers.Handoverer
	// Mode returns the driver's mode, ModeAdvisory or ModeTable.
	Mode() string
}

// New returns a Driver for opts, validated; the first call connects.
func New(opts Options) (Driver, error) { return open(opts, nil) }

// NewWithPool returns a Driver using pool, which it never closes; table
// mode runs its statements there. Advisory mode and the LISTEN connection
// open their own with pool.Config().ConnConfig, outside MaxConns and the
// pool's connect hooks. opts' connection fields (URL, Host, ...) must be empty.
func NewWithPool(pool *pgxpool.Pool, opts Options) (Driver, error) {
	if pool == nil {
		return nil, drivers.OptionErrorf("", "nil pool")
	}
	if kit.SetKey(opts, connectionKeys...) != "" || opts.TLS != nil {
		return nil, drivers.OptionErrorf("", "connection options are not used with an existing pool")
	}
	return open(opts, pool)
}

// open returns the driver of opts' mode; table mode uses pool, or when nil its own.
func open(opts Options, pool *pgxpool.Pool) (Driver, error) {
	opts = opts.withDefaults()
	n, err := opts.validate()
	if err != nil {
		return nil, err
	}
	var cfg *pgxpool.Config // the owned pool's
	var cc *pgx.ConnConfig  // pinned and LISTEN connections
	if pool != nil {
		cc = pool.Config().ConnConfig
	} else if cfg, err = opts.poolConfig(); err == nil {
		cc = cfg.ConnConfig
	} else {
		return nil, err
	}
	b := &base{Owner: redact.Owner{Name: "postgres.Driver", Options: opts}, opts: opts, names: n, connCfg: cc,
		bootKey: "mutexfx.boot:" + n.boot, boot: bootCheckSQL(n), schema: baseSchema(n), channels: []string{n.channel}}
	b.life.Init()
	if cfg != nil {
		cc.DialFunc = b.lifeDial(cc.DialFunc)
	}
	if opts.Mode == ModeAdvisory {
		return newAdvisory(b), nil
	}
	return newTable(b, cfg, pool), nil
}

// Factory returns the "postgres" driver factory, configured by Options'
// koanf tags (without connection keys when driver.client names a
// *pgxpool.Pool). An invalid option is a *config.Error wrapping ErrOptions.
func Factory() drivers.Factory {
	f := kit.NewFactory("a *pgxpool.Pool", New, NewWithPool)
	f.ConnectionKeys, f.ClientOptions = connectionKeys, "the pool's own configuration applies"
	return f.Of("postgres")
}

// connectionKeys are the connection options' keys, in the order errors name them.
var connectionKeys = []string{"url", "host", "port", "database", "username", "password", "sslMode"}

// base is what both drivers share.
type base struct {
	redact.Owner // prints as its Options only: its configurations hold the password

	opts    Options
	names   names
	connCfg *pgx.ConnConfig
	bootKey string // marks, in a connection's CustomData, that bootCheck passed
	boot    string // the bootCheck statement

	ddl    sqlkit.Schema
	schema []schemaObject // what ensureSchema creates

	mu        sync.Mutex                      // Close's detach runs under it
	subs      kit.Listeners                   // added under mu while open, cleared by Close
	listening bool                            // the LISTEN goroutine started (under mu)
	listener  sync.WaitGroup                  // the LISTEN goroutine, until Close starts
	channels  []string                        // what the LISTEN connection listens on
	granted   map[string]func(payload string) // the grant channels (table mode) and their handlers
	listenPID atomic.Uint32                   // the LISTEN connection's backend, 0 while none

	// Close waits for no stalled link: statements end with the life
	// (life.Bind), and so do the owned pool's connections (lifeDial, conns)
	life  sqlkit.Life
	conns sqlkit.Conns
}

// Mode returns the driver's mode, ModeAdvisory or ModeTable.
func (b *base) Mode() string { return b.opts.Mode }

// lifeDial wraps dial: no connection opens after Close, which cuts the open ones.
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

// serverTime returns ServerTime's result for t and err.
func (b *base) serverTime(t time.Time, err error) (time.Time, error) {
	if err != nil {
		return time.Time{}, fmt.Errorf("postgres: server time: %w", permanent(b.life.ClosedErr(err)))
	}
	return t, nil
}

// shutdown is Close (sqlkit.Life.Close): under b.mu it ends the
// subscriptions and calls detach, then stops the LISTEN goroutine and
// calls release.
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
// the channel (or, in table mode, the driver's own), and a Lost event for
// every advisory lock whose connection broke. The LISTEN connection is
// (re)opened in the background: Subscribe never fails for an unreachable
// server or a pooler refusing LISTEN (waiters then poll). Keys over 7999
// bytes go unnotified; in advisory mode only MaxSessions 1 notifies.
func (b *base) Subscribe(ctx context.Context, fn func(drivers.Event)) (func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.life.Check(ctx); err != nil {
		return nil, err
	}
	remove := b.subs.Add(fn)
	b.startListenerLocked()
	return func() { remove() }, nil
}

// startListenerLocked (b.mu held) starts the LISTEN goroutine, which
// reconnects with backoff.Default until Close.
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

// listenOnce delivers notifications until the connection fails or ctx ends.
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
	b.listenPID.Store(conn.PgConn().PID())
	defer b.listenPID.Store(0)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return
		}
		if grant := b.granted[n.Channel]; grant != nil {
			grant(n.Payload)
		} else if n.Payload != "" {
			b.subs.Publish(drivers.Event{Kind: drivers.Released, Key: n.Payload})
		}
	}
}
