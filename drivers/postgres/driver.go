package postgres

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// ErrClosed is returned by calls on a closed Driver: it is drivers.ErrClosed.
var ErrClosed = drivers.ErrClosed

// Driver keeps locks in PostgreSQL, as advisory locks (ModeAdvisory: the
// advisory driver, advisory*.go) or as rows of a table (ModeTable: the
// table driver, table*.go); New picks one by Options.Mode. Both are safe
// for concurrent use. Capabilities only one of them has are found by type
// assertion: drivers.Lister (table mode).
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
	if err != nil {
		return nil, err
	}
	cfg, err := opts.poolConfig()
	if err != nil {
		return nil, err
	}
	// the connections carry synchronousCommit from their startup
	b := newBase(opts, n, cfg.ConnConfig)
	cfg.ConnConfig.DialFunc = b.lifeDial(cfg.ConnConfig.DialFunc)
	if opts.Mode == ModeAdvisory {
		return newAdvisory(b), nil
	}
	return newTable(b, cfg, nil, false), nil
}

// NewWithPool returns a Driver using pool, which it never closes. Table mode
// runs its statements on the pool. Advisory mode (and every subscription's
// LISTEN connection) opens its own connections with the pool's connection
// configuration (pool.Config().ConnConfig): they do not count against the
// pool's MaxConns and the pool's BeforeConnect/AfterConnect hooks do not run
// for them. Connection fields of opts (URL, Host, ...) must be empty.
func NewWithPool(pool *pgxpool.Pool, opts Options) (Driver, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrOptions)
	}
	if connectionKey(opts) != "" || opts.TLS != nil {
		return nil, fmt.Errorf("%w: connection options are not used with an existing pool", ErrOptions)
	}
	opts = opts.withDefaults()
	n, err := opts.validate()
	if err != nil {
		return nil, err
	}
	b := newBase(opts, n, pool.Config().ConnConfig)
	if opts.Mode == ModeAdvisory {
		return newAdvisory(b), nil
	}
	// the pool's sessions are the application's: synchronousCommit is set
	// per transaction
	return newTable(b, nil, pool, true), nil
}

// base is what both drivers share: options, names, the connection
// configuration, the schema, the subscriptions and their LISTEN
// connection, and the driver's life.
type base struct {
	opts    Options
	names   names
	connCfg *pgx.ConnConfig // pinned and LISTEN connections
	// bootKey marks, in a connection's CustomData, that bootCheck passed
	bootKey string
	boot    string // the bootCheck statement

	ddl    sqlkit.Schema
	schema []schemaObject // what ensureSchema creates (schema.go)

	mu     sync.Mutex
	closed bool
	subs   kit.Listeners // added and cleared under mu, with closed
	// the LISTEN goroutine (subscribe.go), from its first use to Close
	lisStop context.CancelFunc
	lisDone chan struct{}
	// channels are the channels the LISTEN connection listens on; heard,
	// when set, is called with each notification's key before the
	// subscribers
	channels []string
	heard    func(key string)

	// life ends when Close gives up waiting (its ctx ended) or is done
	// (life.go)
	life  sqlkit.Life
	conns sqlkit.Conns // the connections lifeDial made
}

func newBase(opts Options, n names, cc *pgx.ConnConfig) *base {
	b := &base{
		bootKey:  "mutexfx.boot:" + n.boot,
		boot:     bootCheckSQL(n),
		opts:     opts,
		names:    n,
		schema:   baseSchema(n),
		connCfg:  cc,
		channels: []string{n.channel},
	}
	b.life.Init()
	return b
}

// Mode returns the driver's mode, ModeAdvisory or ModeTable.
func (b *base) Mode() string { return b.opts.Mode }

// check returns ctx's error, or ErrClosed once Close was called.
func (b *base) check(ctx context.Context) error { return b.life.Check(ctx) }

// shutdown is Close: it marks the driver closed and ends the
// subscriptions, calls detach under b.mu (the driver forgets what it
// holds), stops the LISTEN goroutine and calls release (the driver closes
// its connections). Calls in flight may finish until ctx ends; then they
// are cut, so that closing does not wait for a statement on a stalled link.
// A second call waits for the first, or its ctx.
func (b *base) shutdown(ctx context.Context, detach func(), release func(context.Context) error) error {
	var lisStop context.CancelFunc
	var lisDone chan struct{}
	if !kit.CloseOnce(&b.mu, &b.closed, func() {
		b.life.Begin()
		lisStop, lisDone = b.lisStop, b.lisDone
		b.subs.Clear()
		detach()
	}) {
		return b.life.Wait(ctx, "postgres")
	}
	return b.life.End(ctx, "postgres", func(ctx context.Context) error {
		if lisStop != nil {
			lisStop()
			<-lisDone
		}
		return release(ctx)
	}, b.conns.Cut)
}
