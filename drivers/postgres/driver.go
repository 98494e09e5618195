package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/reclaim"
)

// ErrClosed is returned by calls on a closed Driver.
var ErrClosed = errors.New("postgres: driver closed")

var (
	_ drivers.Driver     = (*Driver)(nil)
	_ drivers.Renewer    = (*Driver)(nil)
	_ drivers.Subscriber = (*Driver)(nil)
	_ drivers.Describer  = (*Driver)(nil)
	_ drivers.Inspector  = (*Driver)(nil)
)

// Driver keeps locks in PostgreSQL, as advisory locks (ModeAdvisory) or as
// rows of a table (ModeTable). It is safe for concurrent use.
type Driver struct {
	opts  Options
	names names
	sql   statements
	id    string // table mode: this driver's id in the rows' waiter queues
	// bootKey marks, in a connection's CustomData, that bootCheck passed
	bootKey string

	poolCfg  *pgxpool.Config // owned pool's config; nil with NewWithPool
	connCfg  *pgx.ConnConfig // pinned and LISTEN connections
	ownsPool bool

	poolMu sync.Mutex
	pool   *pgxpool.Pool

	schemaMu    sync.Mutex
	schemaReady bool

	mu      sync.Mutex
	closed  bool
	held    map[int64]*advLock // advisory mode: locks held or being taken
	main    *session           // advisory: takes locks without waiting
	waiters []*session         // advisory: blocking waits, then hold
	dialing int                // advisory: waiter sessions being opened
	noDial  time.Time          // advisory: no waiter session is opened before this (a dial failed)
	subs    map[int]func(drivers.Event)
	nextSub int
	lis     *listener // the LISTEN goroutine, from its first use to Close

	watchers watchers     // table mode: waiting acquisitions, by key
	reclaim  reclaim.Loop // table mode: deletes the rows no longer needed (reclaim.go)

	dialSem chan struct{} // one connect of the main session at a time

	// life ends when Close gives up waiting (its ctx ended) or is done
	// (life.go)
	life context.Context
	cut  context.CancelCauseFunc
}

// New returns a Driver for opts. It validates them and connects nothing: the
// first call does.
func New(opts Options) (*Driver, error) {
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
	d := newDriver(opts, n, cfg.ConnConfig, false)
	d.poolCfg, d.ownsPool = cfg, true
	cfg.ConnConfig.DialFunc = d.lifeDial(cfg.ConnConfig.DialFunc)
	return d, nil
}

// NewWithPool returns a Driver using pool, which it never closes. Table mode
// runs its statements on the pool. Advisory mode (and every subscription's
// LISTEN connection) opens its own connections with the pool's connection
// configuration (pool.Config().ConnConfig): they do not count against the
// pool's MaxConns and the pool's BeforeConnect/AfterConnect hooks do not run
// for them. Connection fields of opts (URL, Host, ...) must be empty.
func NewWithPool(pool *pgxpool.Pool, opts Options) (*Driver, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrOptions)
	}
	if opts.URL != "" || opts.Host != "" || opts.Port != 0 || opts.Database != "" ||
		opts.Username != "" || opts.Password != "" || opts.SSLMode != "" || opts.TLS != nil {
		return nil, fmt.Errorf("%w: connection options are not used with an existing pool", ErrOptions)
	}
	opts = opts.withDefaults()
	n, err := opts.validate()
	if err != nil {
		return nil, err
	}
	// the pool's sessions are the application's: synchronousCommit is set
	// per transaction
	d := newDriver(opts, n, pool.Config().ConnConfig, true)
	d.pool = pool
	return d, nil
}

func newDriver(opts Options, n names, cc *pgx.ConnConfig, txnSync bool) *Driver {
	life, cut := context.WithCancelCause(context.Background())
	return &Driver{
		life:    life,
		cut:     cut,
		id:      rand.Text(),
		bootKey: "mutexfx.boot:" + n.boot,
		opts:    opts,
		names:   n,
		sql:     buildStatements(n, opts, txnSync),
		connCfg: cc,
		held:    map[int64]*advLock{},
		subs:    map[int]func(drivers.Event){},
		dialSem: make(chan struct{}, 1),
	}
}

// Mode returns the driver's mode, ModeAdvisory or ModeTable.
func (d *Driver) Mode() string { return d.opts.Mode }

// Features reports session locks with server-side waits in advisory mode,
// expiring locks with waits in the driver (queued in the row, woken by
// NOTIFY) in table mode; both use the server's clock and fence.
func (d *Driver) Features() drivers.Features {
	if d.opts.Mode == ModeAdvisory {
		return drivers.Features{Expiring: false, ServerTime: true, Fencing: true,
			BlockingWait: d.opts.MaxSessions > 1, Scope: "server", MinTTL: 500 * time.Millisecond}
	}
	return drivers.Features{Expiring: true, ServerTime: true, Fencing: true, BlockingWait: true, Scope: "server", MinTTL: 500 * time.Millisecond}
}

// Acquire makes one attempt to take req.Key for req.Token. Errors that
// retrying cannot cure match drivers.ErrPermanent (permanent).
func (d *Driver) Acquire(ctx context.Context, req drivers.AcquireRequest) (res drivers.AcquireResult, err error) {
	if err := d.check(ctx); err != nil {
		return drivers.AcquireResult{}, err
	}
	defer func() { err = permanent(d.closedErr(err)) }()
	if d.opts.Mode == ModeAdvisory {
		return d.advAcquire(ctx, req)
	}
	return d.tableAcquire(ctx, req)
}

// Release frees key if token holds it and notifies the channel.
func (d *Driver) Release(ctx context.Context, key, token string) (ok bool, err error) {
	if err := d.check(ctx); err != nil {
		return false, err
	}
	defer func() { err = d.closedErr(err) }()
	if d.opts.Mode == ModeAdvisory {
		return d.advRelease(ctx, key, token)
	}
	return d.tableRelease(ctx, key, token)
}

// Extend renews key for ttl (table mode) or checks that the session still
// holds it (advisory mode).
func (d *Driver) Extend(ctx context.Context, key, token string, ttl time.Duration) (ok bool, err error) {
	if err := d.check(ctx); err != nil {
		return false, err
	}
	defer func() { err = d.closedErr(err) }()
	if d.opts.Mode == ModeAdvisory {
		return d.advExtend(ctx, key, token)
	}
	return d.tableExtend(ctx, key, token, ttl)
}

// Renew renews (table mode) or checks (advisory mode) many leases, with one
// statement per 10,000 leases (table) or per pinned connection (advisory).
func (d *Driver) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	if err := d.check(ctx); err != nil {
		out := make([]drivers.RenewResult, len(leases))
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	var out []drivers.RenewResult
	if d.opts.Mode == ModeAdvisory {
		out = d.advRenew(ctx, leases)
	} else {
		out = d.tableRenew(ctx, leases)
	}
	for i := range out {
		out[i].Err = d.closedErr(out[i].Err)
	}
	return out
}

// Inspect describes key's holder. In advisory mode the token and fence are
// known only for locks this driver holds; a lock held by another session is
// reported with an empty Token.
func (d *Driver) Inspect(ctx context.Context, key string) (info drivers.LockInfo, held bool, err error) {
	if err := d.check(ctx); err != nil {
		return drivers.LockInfo{}, false, err
	}
	defer func() { err = d.closedErr(err) }()
	if d.opts.Mode == ModeAdvisory {
		return d.advInspect(ctx, key)
	}
	return d.tableInspect(ctx, key)
}

// Close ends the subscriptions and the LISTEN connection, closes the pinned connections (which frees
// their advisory locks) and the pool the driver created. It does not close a
// pool given to NewWithPool. Later calls fail with ErrClosed. Calls still
// in flight when Close is done, or when ctx ends, are cut (they fail with
// an error wrapping ErrClosed, or report the lock not held): Close does not
// wait for statements on a stalled link. It returns ctx's error when ctx
// ended first.
func (d *Driver) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	lis := d.lis
	d.subs = map[int]func(drivers.Event){}
	sessions := append([]*session{}, d.waiters...)
	if d.main != nil {
		sessions = append(sessions, d.main)
	}
	d.main, d.waiters = nil, nil
	d.held = map[int64]*advLock{}
	d.mu.Unlock()
	// calls in flight may finish until ctx ends; then they are cut, so
	// that closing the pool does not wait for a statement on a stalled
	// link
	defer d.cut(ErrClosed)
	stop := context.AfterFunc(ctx, func() { d.cut(ErrClosed) })
	if lis != nil {
		lis.stop()
	}
	d.reclaim.Stop()
	var errs []error
	for _, s := range sessions {
		if err := s.close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	d.poolMu.Lock()
	if d.ownsPool && d.pool != nil {
		d.pool.Close()
	}
	d.poolMu.Unlock()
	if !stop() && len(errs) == 0 {
		// ctx ended first: calls may have been cut
		errs = append(errs, fmt.Errorf("postgres: close: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}

func (d *Driver) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	return nil
}

// getPool returns the pool, creating the owned one at first use. Creating a
// pool connects nothing.
func (d *Driver) getPool() (*pgxpool.Pool, error) {
	d.poolMu.Lock()
	defer d.poolMu.Unlock()
	if d.pool != nil {
		return d.pool, nil
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	p, err := pgxpool.NewWithConfig(context.Background(), d.poolCfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: pool: %w", err)
	}
	d.pool = p
	return p, nil
}

// ensureSchema creates the fence sequence (and, in table mode, the table)
// when missing, once per driver, serialised between drivers by a
// transaction-level advisory lock.
func (d *Driver) ensureSchema(ctx context.Context, begin func(context.Context) (pgx.Tx, error)) error {
	d.schemaMu.Lock()
	defer d.schemaMu.Unlock()
	if d.schemaReady {
		return nil
	}
	tx, err := begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// the DDL waits for the other drivers' (and for the tables' locks): a
	// role's lock_timeout or statement_timeout must not fail it, ctx bounds it
	if _, err := tx.Exec(ctx, "SELECT set_config('lock_timeout', '0', true), set_config('statement_timeout', '0', true)"); err != nil {
		return err
	}
	var seq, table, boot *string
	var cols int
	// the commit is synchronous whatever the session's setting: a sequence
	// created in a commit a crash forgets would start again at 1
	err = tx.QueryRow(ctx, "SELECT pg_advisory_xact_lock($1), "+
		"set_config('synchronous_commit', 'on', true), to_regclass($2)::text, to_regclass($3)::text, "+
		"(SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass($3) AND NOT attisdropped "+
		"AND attname = 'queue'), to_regclass($4)::text",
		ddlLockKey, d.names.sequence, d.names.table, d.names.boot).Scan(nil, nil, &seq, &table, &cols, &boot)
	if err != nil {
		return err
	}
	if seq == nil {
		if _, err := tx.Exec(ctx, d.sql.createSequence); err != nil {
			return err
		}
	}
	if table == nil && d.opts.Mode == ModeTable {
		if _, err := tx.Exec(ctx, d.sql.createTable); err != nil {
			return err
		}
	}
	if table != nil && cols < 1 && d.opts.Mode == ModeTable {
		// a table created before the queue column existed
		if _, err := tx.Exec(ctx, d.sql.addColumns); err != nil {
			return err
		}
	}
	if boot == nil {
		for _, s := range []string{d.sql.createBoot, d.sql.insertBoot} {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	d.schemaReady = true
	return nil
}

// schemaLost forgets that the schema exists, after an undefined_table error.
func (d *Driver) schemaLost() {
	d.schemaMu.Lock()
	d.schemaReady = false
	d.schemaMu.Unlock()
}

// ddlLockKey serialises the drivers' CREATE statements (any constant works:
// a collision only makes two DDL transactions wait for each other).
const ddlLockKey int64 = 0x6d75746578667800 // "mutexfx\x00"

// sqlState returns err's SQLSTATE, or "".
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// retryable reports serialization failures, deadlocks, lock timeouts, and failures that
// happened before the statement could run: nothing sent yet, or the backend
// terminated (admin shutdown, crash recovery, starting up) — a pool hands
// out idle connections whose backend was terminated meanwhile.
func retryable(err error) bool {
	switch sqlState(err) {
	case "40001", "40P01", "55P03", "57P01", "57P02", "57P03":
		return true
	}
	return pgconn.SafeToRetry(err)
}

// retry runs f until it succeeds or fails for good. A serialization
// failure, a deadlock or a lock timeout (contended statements fail so
// when a server or role sets the default isolation to serializable or
// repeatable read, or a short lock_timeout) is retried for up to
// conflictBudget, other retryable failures five times,
// with short growing pauses, jittered so that the conflicting callers do
// not meet again. A statement cancelled while ctx lives (cancelledByOthers)
// counts among the other failures.
func retry(ctx context.Context, f func() error) error {
	delay := time.Millisecond
	until := time.Now().Add(conflictBudget)
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || !retryable(err) && !cancelledByOthers(ctx, err) {
			return err
		}
		if s := sqlState(err); s == "40001" || s == "40P01" || s == "55P03" {
			if time.Now().After(until) {
				return err
			}
		} else if attempt == 5 {
			return err
		}
		t := time.NewTimer(delay/2 + mrand.N(delay))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 32*time.Millisecond)
	}
}

// cancelledByOthers reports a statement the server cancelled (57014,
// "canceling statement due to user request") although ctx, the call's, has
// not ended: the cancel was not this driver's. PostgreSQL reports so a lock
// timeout that fired as its wait was granted, when the same statement then
// waits for a second lock (the second wait clears the flag that names the
// timeout); an operator's pg_cancel_backend looks the same. The statement
// was rolled back, so it can run again.
func cancelledByOthers(ctx context.Context, err error) bool {
	return sqlState(err) == "57014" && ctx.Err() == nil
}

// conflictBudget is how long retry retries serialization failures,
// deadlocks and lock timeouts (within the call's ctx).
const conflictBudget = 5 * time.Second
