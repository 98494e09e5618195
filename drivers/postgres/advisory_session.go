package postgres

import (
	"context"
	"crypto/tls"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/hangup"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// session is a connection the advisory driver pins for its locks, which end
// with it; its statements run one at a time (slot). The hang-up watch
// reports its locks lost as soon as the server ends it. Idle and holding
// locks, it also peeks at what the server sends unasked: a terminated
// backend sends its FATAL ErrorResponse ('E') before it releases its locks,
// the one signal that precedes another session being granted them.
type session struct {
	conn   *pgx.Conn
	slot   sqlkit.Slot // held while a statement runs
	waiter bool        // may run blocking waits (not the main session)
	ident  string      // what identify set (guarded by slot)

	hup    hangup.Conn // watched by the driver's
	hungUp func()      // what hup calls: breaks s, then reaps it

	locks     map[int64]*advLock // guarded by the driver's mu
	holding   atomic.Bool        // len(locks) > 0, written with locks
	dead      atomic.Bool        // written under the driver's mu
	closeOnce sync.Once
}

// advLock is an advisory lock this driver holds, or is taking (no s yet).
type advLock struct {
	key, token string
	fence      uint64
	s          *session
}

func (s *session) lock(ctx context.Context) error {
	if s.slot.LockContext(ctx, nil) != nil {
		return ctx.Err()
	}
	s.busy()
	return nil
}

// busy watches s for hang-ups only: a statement's reply must not wake it.
func (s *session) busy() {
	if !s.dead.Load() {
		s.hup.Arm(s.hungUp)
	}
}

// unlock gives the slot back, the watch peeking if s holds locks (they
// change only with the slot held, or when s dies). The last statement on
// a dead session closes it.
func (s *session) unlock() {
	switch {
	case s.dead.Load():
	case s.holding.Load():
		s.hup.ArmPeek(s.hungUp, func(first byte) bool { return first == 'E' })
	default:
		s.hup.Arm(s.hungUp) // as busy left it: no system call
	}
	s.slot.Unlock()
	if s.dead.Load() {
		s.reap()
	}
}

// reap closes a dead session's connection unless a statement runs on it.
func (s *session) reap() {
	if s.slot.TryLock() {
		_ = s.closeConn(context.Background())
		s.slot.Unlock()
	}
}

// closeConn closes the connection; the caller holds the slot.
func (s *session) closeConn(ctx context.Context) (err error) {
	s.hup.Forget()
	s.closeOnce.Do(func() { err = s.conn.Close(ctx) })
	return err
}

// cut closes the socket under a stuck statement (pgx tolerates it).
func (s *session) cut() {
	s.hup.Forget()
	s.closeOnce.Do(func() { _ = s.conn.PgConn().Conn().Close() })
}

// dial opens a pinned connection: when a statement's ctx ends, pgx cancels
// it, closing the connection (its locks lost) StallTimeout later.
func (d *advisoryDriver) dial(ctx context.Context, waiter bool) (*session, error) {
	// a dial on a stalled link ends with the life (NewWithPool: no lifeDial)
	ctx, stop := d.life.Bind(ctx)
	defer stop()
	cfg := d.connCfg.Copy()
	stall := d.opts.StallTimeout
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: stall}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err = conn.Exec(ctx, sessionSetup); err == nil {
		err = d.ensureSchema(ctx, conn.Begin)
	}
	if err == nil {
		if _, err = d.bootCheck(ctx, conn.PgConn()); sqlState(err) == "42P01" {
			d.ddl.Lost() // the next dial creates the marker again
		}
	}
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	s := &session{conn: conn, waiter: waiter, locks: map[int64]*advLock{}}
	nc := conn.PgConn().Conn()
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, _ := nc.(syscall.Conn) // none: not watched
	s.hup.Watch(&d.hup, sc)
	s.hungUp = func() { d.broken(s); s.reap() }
	return s, nil
}

// broken marks s dead, its locks lost, reported to the subscribers.
func (d *advisoryDriver) broken(s *session) {
	d.mu.Lock()
	if s.dead.Swap(true) {
		d.mu.Unlock()
		return
	}
	if d.main == s {
		d.main = nil
	}
	d.waiters = slices.DeleteFunc(d.waiters, func(w *session) bool { return w == s })
	var lost []drivers.Event
	for h, l := range s.locks {
		if d.held[h] == l {
			delete(d.held, h)
		}
		lost = append(lost, drivers.Event{Kind: drivers.Lost, Key: l.key, Token: l.token})
	}
	s.locks = map[int64]*advLock{}
	s.holding.Store(false)
	d.mu.Unlock()
	d.subs.Publish(lost...)
}

// settle, after a statement on s failed (slot held), breaks s when its
// connection is gone; it reports whether s is dead.
func (d *advisoryDriver) settle(s *session) bool {
	if s.conn.IsClosed() {
		d.broken(s)
		s.hup.Forget()
		return true
	}
	return s.dead.Load()
}

// close closes the connection, freeing its locks, once its statement
// ends, or under it when ctx ends.
func (s *session) close(ctx context.Context) error {
	if s.slot.LockContext(ctx, nil) != nil {
		s.cut()
		return ctx.Err()
	}
	defer s.slot.Unlock()
	return s.closeConn(ctx)
}

// mainSession returns the main session, slot taken, opening it if needed.
func (d *advisoryDriver) mainSession(ctx context.Context) (*session, error) {
	for {
		d.mu.Lock()
		if d.life.Closed() {
			d.mu.Unlock()
			return nil, ErrClosed
		}
		s := d.main
		d.mu.Unlock()
		if s != nil {
			if err := s.lock(ctx); err != nil {
				return nil, err
			}
			if d.alive(s) {
				return s, nil
			}
			s.unlock()
			continue
		}
		if d.dialSlot.LockContext(ctx, nil) != nil {
			return nil, ctx.Err()
		}
		d.mu.Lock()
		again := d.main != nil
		d.mu.Unlock()
		var err error
		if !again {
			if s, err = d.dial(ctx, false); err == nil && !d.adopt(ctx, s) {
				err = ErrClosed
			}
		}
		d.dialSlot.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

// waiterSession returns, slot taken, a lockless session for a blocking
// wait; nil when all MaxSessions are in use or none opens now.
func (d *advisoryDriver) waiterSession(ctx context.Context) (*session, error) {
	d.mu.Lock()
	if d.life.Closed() {
		d.mu.Unlock()
		return nil, ErrClosed
	}
	for _, s := range d.waiters {
		if len(s.locks) == 0 && s.slot.TryLock() { // (broken removed the dead ones)
			s.busy()
			d.mu.Unlock()
			return s, nil
		}
	}
	if 1+len(d.waiters)+d.dialing >= d.opts.MaxSessions || time.Now().Before(d.noDial) {
		d.mu.Unlock()
		return nil, nil
	}
	d.dialing++
	d.mu.Unlock()
	s, err := d.dial(ctx, true)
	d.mu.Lock()
	d.dialing--
	if err != nil && ctx.Err() == nil {
		// refused (max_connections, the role's limit) or failed: for a
		// second, callers make one attempt on the main session instead
		d.noDial = time.Now().Add(time.Second)
		err = nil
	}
	d.mu.Unlock()
	if s == nil {
		return nil, err
	}
	s.slot.Lock()
	s.busy()
	if !d.adopt(ctx, s) {
		return nil, ErrClosed
	}
	return s, nil
}

// adopt registers a new session, or closes it when the driver closed.
func (d *advisoryDriver) adopt(ctx context.Context, s *session) bool {
	d.mu.Lock()
	if d.life.Closed() {
		d.mu.Unlock()
		_ = s.closeConn(context.WithoutCancel(ctx))
		return false
	}
	if !s.waiter {
		d.main = s
	} else if !s.dead.Load() { // hung up once armed: broken ran, listing it nowhere
		d.waiters = append(d.waiters, s)
	}
	d.mu.Unlock()
	return true
}

func (d *advisoryDriver) alive(s *session) bool { return !s.dead.Load() && !d.life.Closed() }
