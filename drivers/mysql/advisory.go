package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/dbconn"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// advisoryDriver holds GET_LOCK locks (ModeAdvisory), each on its own
// pinned connection: a blocked waiter delays no other lock, a broken
// connection loses only its own.
type advisoryDriver struct {
	core

	stmts   atomic.Pointer[advStatements] // set by ensureSchema
	noIdent atomic.Bool                   // a holder row write was refused: write no more

	mu   sync.Mutex
	held map[string]*heldLock // by key

	keep *dbconn.Keeper[sockState] // connections kept between acquisitions (advisory_conn.go)

	bootSQL []string     // boot time expressions, tried in order (advisory_session.go)
	bootSrc atomic.Int32 // index of the one in use

	monitorOnce sync.Once
	monitorWG   sync.WaitGroup
	wake        chan struct{} // wakes the monitor early (wakeFor)

	bgWG sync.WaitGroup // checkOwn's statements (advisory_conn.go)
}

func newAdvisory(db *sql.DB, own bool, socks *sockets, s settings) *advisoryDriver {
	a := &advisoryDriver{held: map[string]*heldLock{}, wake: make(chan struct{}, 1), bootSQL: bootSQL}
	a.init(a, db, own, socks, s)
	a.keep = dbconn.NewKeeper(db, socks, keepConns, keepFor)
	return a
}

// Features reports the advisory locks' properties.
func (a *advisoryDriver) Features() drivers.Features {
	return drivers.Features{Expiring: false, ServerTime: true, Fencing: true, BlockingWait: true, Scope: "server", MinTTL: 500 * time.Millisecond}
}

// Extend checks on the lock's own connection that it still holds it (ttl
// is ignored; a failed check reports it lost). ctx cuts the wait for the
// answer, never the check (see checkOwn).
func (a *advisoryDriver) Extend(ctx context.Context, key, token string, _ time.Duration) (bool, error) {
	return call(&a.core, ctx, func(ctx context.Context) (bool, error) {
		h := a.get(key, token)
		if h == nil || ctx.Err() != nil {
			return false, ctx.Err()
		}
		start := time.Now()
		held, errs := a.probeOwnAll(ctx, []*heldLock{h}) // drops h if not held
		if held[0] {
			h.confirm(start)
		}
		return held[0], errs[0]
	})
}

// Close drops the pinned connections (the server frees their locks), stops
// the driver's goroutines and closes its own pool (not NewWithDB's). Calls
// in flight are cut when Close is done or ctx ends (then: ctx's error).
func (a *advisoryDriver) Close(ctx context.Context) error {
	return a.core.close(ctx, a.close)
}

// heldLock is one advisory lock and the connection holding it.
type heldLock struct {
	key, token, name string
	fence            uint64
	connID           int64         // its connection's CONNECTION_ID()
	takenAt          int64         // the server's clock (takenSQL) in its session, at or before the acquire
	boot             atomic.Int64  // the boot time read with its session or first probed; 0: none yet
	idle             time.Duration // its session's wait_timeout (0: unknown): upkeep

	used      atomic.Int64 // UnixNano: last statement on conn started (or the acquire ended)
	confirmed atomic.Int64 // UnixNano: last acquire, renewal or Extend that found it held started
	dropAt    atomic.Int64 // UnixNano: when the monitor drops it after a failed renewal; 0: never

	mu       sqlkit.Slot // serialises the use of conn
	conn     pinned
	giveUp   atomic.Bool                        // a release gave up on the busy conn, or h was lost: its user drops it (unlock)
	abort    atomic.Pointer[context.CancelFunc] // ends the driver's own check running on conn
	lostSent atomic.Bool                        // the Lost event went out
	done     bool                               // released or lost: conn is gone
}

func (a *advisoryDriver) acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	if err := checkToken(req.Token); err != nil {
		return drivers.AcquireResult{}, err
	}
	name := lockName(req.Key)
	start := time.Now()
	conn, cached, err := a.keep.Get(ctx)
	if err != nil {
		return drivers.AcquireResult{}, fmt.Errorf("mysql: acquire: %w", err)
	}
	fence, id, err := a.take(ctx, conn, req, name)
	if cached && ctx.Err() == nil && (errors.Is(err, driver.ErrBadConn) || errors.Is(err, gomysql.ErrInvalidConn)) {
		// a kept connection died idle, its session with it: once more on a pooled one
		dbconn.Discard(conn.Conn)
		if conn, err = a.keep.Pin(ctx); err != nil {
			return drivers.AcquireResult{}, fmt.Errorf("mysql: acquire: %w", err)
		}
		fence, id, err = a.take(ctx, conn, req, name)
	}
	if err != nil {
		dbconn.Discard(conn.Conn) // the statement may have taken the lock: the server frees it
		if missingTable(err) {
			a.ddl.Lost()
		}
		return drivers.AcquireResult{}, fmt.Errorf("mysql: acquire: %w", err)
	}
	if fence == 0 {
		a.keep.Put(conn)
		return drivers.AcquireResult{}, nil
	}
	h := &heldLock{key: req.Key, token: req.Token, name: name, fence: fence, connID: id.conn, takenAt: id.at, conn: conn,
		idle: time.Duration(id.wait) * time.Second}
	h.boot.Store(id.boot)
	h.used.Store(time.Now().UnixNano())
	h.confirmed.Store(start.UnixNano())
	a.mu.Lock()
	old := a.held[req.Key]
	a.held[req.Key] = h
	a.mu.Unlock()
	conn.ArmHangup(func() { a.lose(h) })
	a.wakeFor(h)
	// an earlier holder's connection lost the key unnoticed: report it (if busy, its statement will)
	if old != nil && old.mu.TryLock() {
		a.dropLocked(old, true)
		old.mu.Unlock()
	}
	a.monitorOnce.Do(a.startMonitor)
	if a.life.Closed() { // raced with Close, which may have missed h
		a.drop(h)
		return drivers.AcquireResult{}, ErrClosed
	}
	return drivers.AcquireResult{Acquired: true, Fence: fence}, nil
}

// take writes the holder's identity if changed, then runs name's acquire
// statement on conn, blocking up to req.Wait. It returns the fence (0: not
// acquired) and conn's session, known or read in the same round trip (the
// counter fence: in another, once acquired).
func (a *advisoryDriver) take(ctx context.Context, conn pinned, req drivers.AcquireRequest, name string) (fence uint64, s session, err error) {
	known, ok, err := a.session(ctx, conn)
	if err != nil {
		return 0, s, err
	}
	if err := a.identify(ctx, conn, req.Token); err != nil {
		return 0, s, err
	}
	// never past ctx's deadline: a statement ctx cancels costs its connection
	wait := max(req.Wait, 0)
	if dl, has := ctx.Deadline(); has {
		wait = max(min(wait, time.Until(dl)-20*time.Millisecond), 0)
	}
	args := []any{name, wait.Milliseconds()}
	st, timed := a.stmts.Load(), 0
	if wait > 0 {
		timed = 1
	} else {
		args = args[:1] // the statement says 0: the server parses no division
	}
	q, qs := st.acquire[timed][0], st.acquire[timed][1]
	switch st.fence {
	case FenceSequence, FenceUUIDShort:
		// NULL: the wait was interrupted (max_*_time, KILL QUERY): not held
		var f sql.Null[uint64]
		if ok {
			s = known
			f.V, f.Valid, err = conn.QueryUint(ctx, q, args)
		} else if err = conn.QueryRow(ctx, qs, args, &f, &s.conn, &s.at, &s.wait); err == nil {
			learn(conn, s)
		}
		return f.V, s, err
	}
	args = append([]any{sqlkit.KeyHash(req.Key)}, args...)
	if st.holders { // the statement sets the counter row's holder columns
		holder := sqlkit.Identity(req.Token, 0)
		args = append(append([]any{args[0], holder}, args[1:]...), holder)
	}
	res, err := conn.Exec(ctx, q, args)
	if err != nil {
		return 0, s, err
	}
	id, err := res.LastInsertId()
	switch {
	case err != nil || id <= 0:
	case ok:
		s = known
	default:
		if err = conn.QueryRow(ctx, "SELECT "+sessionSQL, nil, &s.conn, &s.at, &s.wait); err == nil {
			learn(conn, s)
		}
	}
	return uint64(id), s, err
}

// get returns the live lock key held by token, or nil.
func (a *advisoryDriver) get(key, token string) *heldLock {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h := a.held[key]; h != nil && h.token == token {
		return h
	}
	return nil
}

// Release runs RELEASE_LOCK on the lock's connection or, when it cannot
// tell that it ran, drops the connection (the lock never expires).
func (a *advisoryDriver) Release(ctx context.Context, key, token string) (_ bool, err error) {
	ctx, stop := a.bind(ctx)
	defer stop()
	defer func() { err = a.life.ClosedErr(err) }()
	h := a.get(key, token)
	if h == nil {
		return false, nil
	}
	if err := h.mu.LockContext(ctx, a.life.Closing()); err != nil { // a statement runs on the connection
		if h.abandon() {
			a.unlock(h)
		}
		a.forget(h)
		return false, fmt.Errorf("mysql: release: %w", err)
	}
	defer h.mu.Unlock()
	if h.done {
		return false, nil
	}
	a.forget(h)
	h.done = true
	r, valid, err := uint64(0), false, context.Cause(ctx)
	if err == nil {
		r, valid, err = h.conn.QueryUint(ctx, "SELECT RELEASE_LOCK(?)", []any{h.name})
	}
	if err != nil || !valid || r != 1 {
		dbconn.Discard(h.conn.Conn)
		if err != nil {
			return false, fmt.Errorf("mysql: release: %w", err)
		}
		return false, nil
	}
	a.keep.Put(h.conn)
	a.subs.Publish(drivers.Event{Kind: drivers.Released, Key: key})
	return true, nil
}

// drop forgets h and drops its connection unless h ended.
func (a *advisoryDriver) drop(h *heldLock) {
	h.mu.Lock()
	a.dropLocked(h, false)
	h.mu.Unlock()
}

// dropLocked is drop with h.mu held; lost tells the subscribers before the
// connection goes: the holder hears of it before anyone can get the lock.
func (a *advisoryDriver) dropLocked(h *heldLock, lost bool) {
	if h.done {
		return
	}
	h.done = true
	a.forget(h)
	if lost {
		a.tellLost(h)
	}
	dbconn.Discard(h.conn.Conn)
}

func (a *advisoryDriver) forget(h *heldLock) {
	a.mu.Lock()
	if a.held[h.key] == h {
		delete(a.held, h.key)
	}
	a.mu.Unlock()
}

// close waits for the monitor and checkOwn's statements, then drops every
// pinned connection.
func (a *advisoryDriver) close() {
	a.monitorOnce.Do(func() {}) // no monitor after close
	a.monitorWG.Wait()
	a.mu.Lock() // past it, checkOwn (under mu) starts no statement
	hs := slices.Collect(maps.Values(a.held))
	clear(a.held)
	a.mu.Unlock()
	a.bgWG.Wait() // their contexts ended when Close started
	a.keep.Close()
	for _, h := range hs {
		a.drop(h)
	}
}
