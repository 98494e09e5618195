package postgres

import (
	"context"
	"crypto/tls"
	"net"
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

// session is a connection the advisory driver pins for its locks. Its
// statements run one at a time (slot). Its locks (guarded by the driver's
// mu) end with it.
//
// The driver's hang-up watch (package hangup) tells it at once that the
// server ended the session (pg_terminate_backend, shutdown, crash, a reset
// link), so that its locks are reported lost then rather than at the next
// probe. While no statement runs, the watch also looks at the first byte
// the server sends unasked: a terminated backend sends its FATAL
// ErrorResponse ('E') before it releases its locks, and closes the socket
// only when its process exits, after, so the ErrorResponse is the one
// signal that comes before another session can be granted the locks.
// While a statement runs (its reply would wake the watch), it watches for
// hang-ups only.
type session struct {
	conn   *pgx.Conn
	slot   sqlkit.Slot // held while a statement runs
	waiter bool        // may run blocking waits (not the main session)
	ident  string      // the session's application_name, when identify set it (guarded by slot)

	hup    *hangup.Watcher // the driver's
	hupC   hangup.Conn     // the connection's registration with hup
	sc     syscall.Conn    // the connection's socket; nil: not watched (probes find the break)
	hungUp func()          // what hup calls: the driver's hungUp

	// guarded by the driver's mu
	locks map[int64]*advLock
	dead  atomic.Bool // written under the driver's mu

	closeOnce sync.Once
}

// advLock is an advisory lock this driver holds, or is taking (pending).
type advLock struct {
	key, token string
	fence      uint64
	s          *session
	pending    bool
}

// lock takes the session's statement slot, or fails with ctx.
func (s *session) lock(ctx context.Context) error {
	if s.slot.LockContext(ctx, nil) != nil {
		return ctx.Err()
	}
	s.busy()
	return nil
}

// tryLock takes the session's statement slot if it is free.
func (s *session) tryLock() bool {
	if !s.slot.TryLock() {
		return false
	}
	s.busy()
	return true
}

// busy watches s for hang-ups only: a statement is about to run, whose
// reply must not wake the watch.
func (s *session) busy() {
	if s.sc != nil && !s.dead.Load() {
		s.hup.Arm(&s.hupC, s.sc, s.hungUp)
	}
}

// unlock gives the statement slot back, the session idle: the watch now
// also looks at what the server sends unasked (an ErrorResponse ends the
// session). The last statement on a dead session closes its connection.
func (s *session) unlock() {
	if s.sc != nil && !s.dead.Load() {
		s.hup.ArmPeek(&s.hupC, s.sc, s.hungUp, func(first byte) bool { return first == 'E' })
	}
	s.slot.Unlock()
	if s.dead.Load() {
		s.reap()
	}
}

// reap closes a dead session's connection unless a statement runs on it:
// whoever runs it does when done (unlock), having seen it dead.
func (s *session) reap() {
	if s.slot.TryLock() {
		s.closeConn(context.Background())
		s.slot.Unlock()
	}
}

// closeConn closes the connection (once), its registration with the watch
// dropped first. The caller holds the slot.
func (s *session) closeConn(ctx context.Context) {
	s.hup.Forget(&s.hupC)
	s.closeOnce.Do(func() { _ = s.conn.Close(context.WithoutCancel(ctx)) })
}

// cut closes the connection's socket under a stuck statement (pgx
// tolerates it).
func (s *session) cut() {
	s.hup.Forget(&s.hupC)
	s.closeOnce.Do(func() { _ = s.conn.PgConn().Conn().Close() })
}

// socketOf returns the socket under c, which the watch needs; nil when it
// has none.
func socketOf(c net.Conn) syscall.Conn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, _ := c.(syscall.Conn)
	return sc
}

// dial opens a pinned connection. A ctx ending during a statement makes pgx
// ask the server to cancel it, and only StallTimeout later close the
// connection, so that a caller's deadline does not drop every lock.
func (d *advisoryDriver) dial(ctx context.Context, waiter bool) (*session, error) {
	// a dial stuck on a stalled link ends with the driver's life, whoever
	// built the connection config (NewWithPool: not lifeDial)
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
	s := &session{conn: conn, waiter: waiter, locks: map[int64]*advLock{},
		hup: &d.hup, sc: socketOf(conn.PgConn().Conn())}
	s.hungUp = func() { d.hungUp(s) }
	return s, nil
}

// hungUp is the watch's call when the server ended s: its locks are lost
// now, and its connection is closed unless a statement runs on it.
func (d *advisoryDriver) hungUp(s *session) {
	d.broken(s)
	s.reap()
}

// broken marks s dead: every lock on it is lost at once and reported to the
// subscribers. Idempotent.
func (d *advisoryDriver) broken(s *session) {
	d.mu.Lock()
	if s.dead.Load() {
		d.mu.Unlock()
		return
	}
	s.dead.Store(true)
	if d.main == s {
		d.main = nil
	}
	for i, w := range d.waiters {
		if w == s {
			d.waiters = append(d.waiters[:i], d.waiters[i+1:]...)
			break
		}
	}
	var lost []drivers.Event
	for h, l := range s.locks {
		if d.held[h] == l {
			delete(d.held, h)
		}
		lost = append(lost, drivers.Event{Kind: drivers.Lost, Key: l.key, Token: l.token})
	}
	s.locks = map[int64]*advLock{}
	d.mu.Unlock()
	d.subs.Publish(lost...)
}

// settle is called, holding s's slot, after a statement failed: when the
// connection is gone the session is broken; it reports whether it is.
func (d *advisoryDriver) settle(s *session) bool {
	if s.conn.IsClosed() {
		d.broken(s)
		s.hup.Forget(&s.hupC)
		return true
	}
	return s.dead.Load()
}

// kill gives a session up (its locks are lost) and closes it; the caller
// holds its slot.
func (d *advisoryDriver) kill(ctx context.Context, s *session) {
	d.broken(s)
	s.closeConn(ctx)
}

// close closes the connection once its statement ends (bounded by ctx),
// which frees its advisory locks in the server.
func (s *session) close(ctx context.Context) error {
	if s.slot.LockContext(ctx, nil) != nil {
		s.cut() // a statement is stuck: close under it
		return ctx.Err()
	}
	defer s.slot.Unlock()
	s.hup.Forget(&s.hupC)
	var err error
	s.closeOnce.Do(func() { err = s.conn.Close(ctx) })
	return err
}

// mainSession returns the main session with its slot taken, opening it at
// first use or after it broke.
func (d *advisoryDriver) mainSession(ctx context.Context) (*session, error) {
	for {
		d.mu.Lock()
		if d.closed {
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
		select {
		case d.dialSem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		d.mu.Lock()
		again := d.main != nil
		d.mu.Unlock()
		if !again {
			s, err := d.dial(ctx, false)
			if err == nil && !d.adopt(ctx, s, false) {
				err = ErrClosed
			}
			if err != nil {
				<-d.dialSem
				return nil, err
			}
		}
		<-d.dialSem
	}
}

// waiterRedial is how long, after a waiter session could not be opened,
// the driver makes do without opening one.
const waiterRedial = time.Second

// waiterSession returns, with its slot taken, a session holding no lock on
// which a blocking wait may run; nil when all MaxSessions are in use or
// one cannot be opened now.
func (d *advisoryDriver) waiterSession(ctx context.Context) (*session, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, ErrClosed
	}
	for _, s := range d.waiters {
		if len(s.locks) == 0 && !s.dead.Load() && s.tryLock() {
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
		// the server refused a connection more (max_connections, the
		// role's CONNECTION LIMIT) or failed: callers wait without a
		// session of their own (one attempt on the main session, then the
		// component's retries) rather than fail, and no dial is tried
		// again for waiterRedial
		d.noDial = time.Now().Add(waiterRedial)
		d.mu.Unlock()
		return nil, nil
	}
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s.slot.Lock()
	s.busy()
	if !d.adopt(ctx, s, true) {
		return nil, ErrClosed
	}
	return s, nil
}

// adopt registers a new session, or closes it when the driver closed.
func (d *advisoryDriver) adopt(ctx context.Context, s *session, waiter bool) bool {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		s.closeConn(ctx)
		return false
	}
	if waiter {
		d.waiters = append(d.waiters, s)
	} else {
		d.main = s
	}
	d.mu.Unlock()
	return true
}

func (d *advisoryDriver) alive(s *session) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !s.dead.Load() && !d.closed
}
