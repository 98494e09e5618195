// Package mysql is the MySQL / MariaDB driver of mutexfx.
//
// In advisory mode (the default) a lock is a GET_LOCK held by a connection
// the driver pins for it: it ends with that connection and is per server.
// In table mode a lock is a row whose expiry is computed by the database's
// clock; it works on clusters. See Options and docs/mysql.md.
package mysql

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/reclaim"
)

// ErrClosed is returned by calls on a closed Driver.
var ErrClosed = errors.New("mysql: driver closed")

// Driver holds locks in MySQL or MariaDB. It is safe for concurrent use.
type Driver struct {
	db    *sql.DB
	ownDB bool
	socks *sockets // the own pool's sockets (socket.go); nil with NewWithDB
	s     settings

	id          []byte // random: this driver in table-mode waiter queues
	retakeSQL   string // table mode's plain UPDATE of a free row (tableRetakeSQL)
	handoverSQL string // table mode's tableHandoverSQL
	takeSQL     string // table mode's short acquire statement
	acquireSQL  string // table mode's queueing acquire statement

	closeOnce sync.Once
	closed    chan struct{}
	// life ends when Close cuts the calls in flight (life.go)
	life context.Context
	cut  context.CancelCauseFunc

	schemaMu sync.Mutex
	schemaOK bool
	fence    string       // advisory: resolved fence source
	advSQL   [2][2]string // advisory: its acquire statement [without, with a timeout][alone, also reading the session]

	adv     advisory
	watch   watcher
	reclaim reclaim.Loop // table mode: deletes the rows no longer needed (reclaim.go)

	subMu  sync.Mutex
	subs   map[int]func(drivers.Event)
	nextID int
}

var (
	_ drivers.Driver     = (*Driver)(nil)
	_ drivers.Renewer    = (*Driver)(nil)
	_ drivers.Subscriber = (*Driver)(nil)
	_ drivers.Describer  = (*Driver)(nil)
)

// New validates opts and returns a driver with its own connection pool. It
// connects nothing: the first call does. Close closes the pool.
func New(opts Options) (*Driver, error) {
	s, err := opts.validate()
	if err != nil {
		return nil, prefixed(err)
	}
	cfg, err := opts.mysqlConfig(s)
	if err != nil {
		return nil, prefixed(err)
	}
	socks := &sockets{}
	connector, err := socks.connector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: %s", scrubPassword(err.Error(), "invalid connection settings", cfg.Passwd))
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(s.maxOpen)
	db.SetMaxIdleConns(s.maxIdle)
	db.SetConnMaxIdleTime(5 * time.Minute)
	d := newDriver(db, true, s)
	if socks.m != nil { // the connector records sockets (socket.go)
		d.socks = socks
	}
	return d, nil
}

// NewWithDB returns a driver using db, a pool the application already has.
// The driver never closes db (Close only returns or discards the
// connections it pinned). Only the options about locks apply (Mode, Table,
// FenceTable, Fence, ProbeInterval, PollInterval, WaiterLiveness,
// RenewBatch, Retries); connection options
// must be empty. db must run in autocommit mode (the default) and should be
// opened with interpolateParams=true (one round trip per statement instead
// of three) and without clientFoundRows.
func NewWithDB(db *sql.DB, opts Options) (*Driver, error) {
	if db == nil {
		return nil, errors.New("mysql: nil *sql.DB")
	}
	s, err := opts.validate()
	if err != nil {
		return nil, prefixed(err)
	}
	for key, v := range map[string]string{"dsn": opts.DSN, "host": opts.Host, "database": opts.Database, "username": opts.Username, "password": opts.Password, "tls": opts.TLS} {
		if v != "" {
			return nil, prefixed(config.Errorf(key, "not allowed with an existing *sql.DB"))
		}
	}
	if opts.Port != 0 || opts.MaxOpenConns != 0 || opts.MaxIdleConns != 0 || opts.DialTimeout != 0 || opts.PreparedStatements {
		return nil, prefixed(config.Errorf("", "connection options are not allowed with an existing *sql.DB"))
	}
	return newDriver(db, false, s), nil
}

func newDriver(db *sql.DB, own bool, s settings) *Driver {
	d := &Driver{db: db, ownDB: own, s: s, closed: make(chan struct{}), subs: map[int]func(drivers.Event){}}
	d.life, d.cut = context.WithCancelCause(context.Background())
	d.id = make([]byte, 16)
	_, _ = rand.Read(d.id) // never fails (crypto/rand)
	d.takeSQL, d.acquireSQL = s.takeSQL(), s.acquireSQL()
	d.retakeSQL = fmt.Sprintf(tableRetakeSQL, s.table)
	d.handoverSQL = fmt.Sprintf(tableHandoverSQL, s.table, heldMark)
	d.adv.init(d)
	d.watch.init(d)
	return d
}

// prefixed puts "mysql: " before non-configuration errors; *config.Error
// stays as is so that the factory can put the key path in front.
func prefixed(err error) error {
	var ce *config.Error
	if errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("mysql: %w", err)
}

// Features reports the mode's properties.
func (d *Driver) Features() drivers.Features {
	if d.s.mode == ModeTable {
		return drivers.Features{Expiring: true, ServerTime: true, Fencing: true, Scope: "cluster", MinTTL: 500 * time.Millisecond}
	}
	return drivers.Features{Expiring: false, ServerTime: true, Fencing: true, BlockingWait: true, Scope: "server", MinTTL: 500 * time.Millisecond}
}

// Acquire makes one attempt to take req.Key for req.Token. Errors that
// retrying cannot cure match drivers.ErrPermanent (permanent).
func (d *Driver) Acquire(ctx context.Context, req drivers.AcquireRequest) (res drivers.AcquireResult, err error) {
	if d.isClosed() {
		return drivers.AcquireResult{}, ErrClosed
	}
	ctx, stop := d.bind(ctx)
	defer stop()
	defer func() { err = permanent(d.closedErr(err)) }()
	if err := d.ensureSchema(ctx); err != nil {
		return drivers.AcquireResult{}, err
	}
	if d.s.mode == ModeTable {
		return d.tableAcquire(ctx, req)
	}
	return d.adv.acquire(ctx, req)
}

// Release frees key if token holds it.
func (d *Driver) Release(ctx context.Context, key, token string) (ok bool, err error) {
	ctx, stop := d.bind(ctx)
	defer stop()
	defer func() { err = d.closedErr(err) }()
	if d.s.mode == ModeTable {
		if d.isClosed() {
			return false, ErrClosed
		}
		return d.tableRelease(ctx, key, token)
	}
	return d.adv.release(ctx, key, token)
}

// Extend renews key for token (table mode) or checks that its connection
// still holds it (advisory mode, where ttl is ignored).
func (d *Driver) Extend(ctx context.Context, key, token string, ttl time.Duration) (ok bool, err error) {
	ctx, stop := d.bind(ctx)
	defer stop()
	defer func() { err = d.closedErr(err) }()
	if d.s.mode == ModeTable {
		if d.isClosed() {
			return false, ErrClosed
		}
		return d.tableExtend(ctx, key, token, ttl)
	}
	return d.adv.extend(ctx, key, token)
}

// Renew extends (table mode) or checks (advisory mode) many leases, with
// one statement per RenewBatch leases.
func (d *Driver) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	if d.isClosed() {
		out := make([]drivers.RenewResult, len(leases))
		for i := range out {
			out[i].Err = ErrClosed
		}
		return out
	}
	ctx, stop := d.bind(ctx)
	defer stop()
	var out []drivers.RenewResult
	if d.s.mode == ModeTable {
		out = d.tableRenew(ctx, leases)
	} else {
		out = d.adv.renew(ctx, leases)
	}
	for i := range out {
		out[i].Err = d.closedErr(out[i].Err)
	}
	return out
}

// Subscribe calls fn with Lost events (advisory mode: a held lock's
// connection broke or was killed) and Released events (a lock released
// through this driver; in table mode also a key this driver found held that
// became free, seen by polling every PollInterval) until cancel is called or
// the driver is closed.
func (d *Driver) Subscribe(ctx context.Context, fn func(drivers.Event)) (func(), error) {
	if d.isClosed() {
		return nil, ErrClosed
	}
	d.subMu.Lock()
	id := d.nextID
	d.nextID++
	d.subs[id] = fn
	d.subMu.Unlock()
	return func() {
		d.subMu.Lock()
		delete(d.subs, id)
		d.subMu.Unlock()
	}, nil
}

// subscribed reports whether anyone listens to events.
func (d *Driver) subscribed() bool {
	d.subMu.Lock()
	defer d.subMu.Unlock()
	return len(d.subs) > 0
}

func (d *Driver) emit(ev drivers.Event) {
	d.subMu.Lock()
	fns := make([]func(drivers.Event), 0, len(d.subs))
	for _, fn := range d.subs {
		fns = append(fns, fn)
	}
	d.subMu.Unlock()
	for _, fn := range fns {
		fn(ev)
	}
}

// Close stops the driver's goroutine, drops the connections it pinned (the
// server then frees their advisory locks) and closes its own pool. A pool
// given to NewWithDB stays open. Calls still in flight when Close is done,
// or when ctx ends, are cut (they fail, with ErrClosed, or report the lock
// not held): Close does not wait for statements on a stalled link. It
// returns ctx's error when ctx ended first.
func (d *Driver) Close(ctx context.Context) error {
	var err error
	d.closeOnce.Do(func() {
		// calls in flight are cut when ctx ends, or at the end
		defer d.cutCalls()
		stop := context.AfterFunc(ctx, d.cutCalls)
		close(d.closed)
		d.adv.close()
		if d.socks != nil {
			d.socks.hup.close()
		}
		d.watch.close()
		d.reclaim.Stop()
		d.subMu.Lock()
		clear(d.subs)
		d.subMu.Unlock()
		if d.ownDB {
			err = d.db.Close()
		}
		if !stop() && err == nil {
			// ctx ended first: calls may have been cut
			err = fmt.Errorf("mysql: close: %w", ctx.Err())
		}
	})
	return err
}

func (d *Driver) isClosed() bool {
	select {
	case <-d.closed:
		return true
	default:
		return false
	}
}

// keyHash is the SHA-256 of a key: the table's primary key and the source
// of advisory lock names, so that any key (any length, any case) maps to a
// fixed-size, case-exact value.
func keyHash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// lockName is the GET_LOCK name of key: "mutexfx:" and the first 48 hex
// digits (192 bits) of its SHA-256, 56 characters, under the 64-character
// limit, distinct for keys differing only in case.
func lockName(key string) string {
	h := sha256.Sum256([]byte(key))
	return "mutexfx:" + hex.EncodeToString(h[:24])
}

// retry runs f again while it fails with a deadlock, a lock wait timeout or
// an interruption not its own (interrupted), at most d.s.retries more
// times.
func (d *Driver) retry(ctx context.Context, f func() error) error {
	for attempt := 0; ; attempt++ {
		err := f()
		if err == nil || attempt >= d.s.retries || !retryable(err) && !interrupted(ctx, err) {
			return err
		}
		t := time.NewTimer(time.Duration(attempt+1) * 5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// retryable reports deadlocks (1213) and lock wait timeouts (1205).
func retryable(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// interrupted reports a statement the server interrupted (1317, "Query
// execution was interrupted": an operator's KILL QUERY) while ctx, the
// call's, lives: the driver ends statements by closing their connection,
// never so. The statement was rolled back, so it can run again.
func interrupted(ctx context.Context, err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && me.Number == 1317 && ctx.Err() == nil
}

// missingTable reports "table doesn't exist" (1146) or, for the fence
// sequence, "unknown sequence" (MariaDB 4091), after which the schema is
// created again.
func missingTable(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1146 || me.Number == 4091)
}
