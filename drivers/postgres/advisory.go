package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/hangup"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// advisoryDriver keeps each lock as a session-level advisory lock on a
// connection it pins (ModeAdvisory): the lock ends with the connection.
type advisoryDriver struct {
	*base
	sql advisoryStatements

	// guarded by mu
	held    map[int64]*advLock // locks held or being taken
	main    *session           // takes locks without waiting
	waiters []*session         // blocking waits, then hold
	dialing int                // waiter sessions being opened
	noDial  time.Time          // no waiter session is opened before this

	dialSlot sqlkit.Slot    // one connect of the main session at a time
	hup      hangup.Watcher // tells when the server ends a session
}

func newAdvisory(b *base) *advisoryDriver {
	return &advisoryDriver{base: b, sql: advisorySQL(b.names), held: map[int64]*advLock{}}
}

// Features reports fenced session locks, waited for in the server unless MaxSessions is 1.
func (d *advisoryDriver) Features() drivers.Features {
	return drivers.Features{Expiring: false, ServerTime: true, Fencing: true,
		BlockingWait: d.opts.MaxSessions > 1, Scope: "server", MinTTL: 500 * time.Millisecond}
}

// Acquire takes req.Key without waiting on the main session, or waiting in
// the server up to req.Wait on a waiter session, which then holds it.
// Errors retrying cannot cure match drivers.ErrPermanent.
func (d *advisoryDriver) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	if err := d.life.Check(ctx); err != nil {
		return drivers.AcquireResult{}, err
	}
	h := advisoryKey(req.Key)
	d.mu.Lock()
	if d.life.Closed() {
		d.mu.Unlock()
		return drivers.AcquireResult{}, ErrClosed
	}
	if _, busy := d.held[h]; busy { // its session would re-enter the lock
		d.mu.Unlock()
		return drivers.AcquireResult{}, nil
	}
	l := &advLock{key: req.Key, token: req.Token}
	d.held[h] = l
	d.mu.Unlock()

	fence, ok, err := d.take(ctx, h, l, req)
	if err != nil || !ok {
		d.mu.Lock()
		if d.held[h] == l {
			delete(d.held, h)
		}
		d.mu.Unlock()
		return drivers.AcquireResult{}, permanent(d.life.ClosedErr(err))
	}
	return drivers.AcquireResult{Acquired: true, Fence: fence}, nil
}

// Release unlocks key on the session holding it for token; with
// MaxSessions 1 it notifies the polling waiters in the same statement.
func (d *advisoryDriver) Release(ctx context.Context, key, token string) (bool, error) {
	if err := d.life.Check(ctx); err != nil {
		return false, err
	}
	stmt, args := d.sql.unlock, []any(nil)
	if d.opts.MaxSessions <= 1 {
		stmt, args = d.sql.unlockNotify, []any{payload(key)}
	}
	n, err := d.unlock(ctx, key, token, "", stmt, args...)
	return n > 0, d.life.ClosedErr(err)
}

// Handover passes the lock to next.Token with a new fence, in one
// statement that unlocks and locks again (a session waiting in the server
// gets it first). With MaxSessions 1 it releases.
func (d *advisoryDriver) Handover(ctx context.Context, key, token string, next drivers.AcquireRequest) (bool, drivers.AcquireResult, error) {
	if d.opts.MaxSessions <= 1 {
		ok, err := d.Release(ctx, key, token)
		return ok, drivers.AcquireResult{}, err
	}
	if err := d.life.Check(ctx); err != nil {
		return false, drivers.AcquireResult{}, err
	}
	fence, err := d.unlock(ctx, key, token, next.Token, d.sql.handover)
	if err != nil || fence <= 0 {
		return fence < 0, drivers.AcquireResult{}, d.life.ClosedErr(err)
	}
	return true, drivers.AcquireResult{Acquired: true, Fence: uint64(fence)}, nil
}

// Extend checks, as Renew, that token's session still holds key (advisory
// locks do not expire).
func (d *advisoryDriver) Extend(ctx context.Context, key, token string, _ time.Duration) (bool, error) {
	r := d.Renew(ctx, []drivers.Lease{{Key: key, Token: token}})[0]
	return r.Held, r.Err
}

// Renew checks many leases, with one statement per holding session.
func (d *advisoryDriver) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	if err := d.life.Check(ctx); err != nil {
		return drivers.RenewFailed(len(leases), err)
	}
	out := make([]drivers.RenewResult, len(leases))
	bySession := map[*session][]int{}
	keys := make([]int64, len(leases))
	for i, ls := range leases {
		h, l := d.ownLock(ls.Key, ls.Token)
		keys[i] = h
		if l != nil {
			bySession[l.s] = append(bySession[l.s], i)
		}
	}
	for s, idx := range bySession {
		held, err := d.heldOn(ctx, s)
		for _, i := range idx {
			out[i] = drivers.RenewResult{Held: held[keys[i]], Err: d.life.ClosedErr(err)}
		}
	}
	return out
}

// Inspect describes key's holder: in full when it holds through this
// driver, else by its session's identity (identify).
func (d *advisoryDriver) Inspect(ctx context.Context, key string) (drivers.LockInfo, bool, error) {
	if err := d.life.Check(ctx); err != nil {
		return drivers.LockInfo{}, false, err
	}
	h := advisoryKey(key)
	d.mu.Lock()
	l := d.held[h]
	if l != nil && l.s != nil && l.key == key && !l.s.dead.Load() {
		info := drivers.LockInfo{Token: l.token, Fence: l.fence}
		d.mu.Unlock()
		return info, true, nil
	}
	d.mu.Unlock()
	var info drivers.LockInfo
	err := d.onMain(ctx, func(s *session) error {
		return s.conn.QueryRow(ctx, d.sql.holder, h).Scan(&info.Holder)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return drivers.LockInfo{}, false, nil
	}
	return info, err == nil, d.life.ClosedErr(err)
}

// ServerTime returns the server's clock (µs), read on the main session.
func (d *advisoryDriver) ServerTime(ctx context.Context) (t time.Time, err error) {
	err = d.onMain(ctx, func(s *session) error { return s.conn.QueryRow(ctx, serverTimeSQL).Scan(&t) })
	return d.serverTime(t, err)
}

// Ping pings the server on the main session, opening it when needed.
func (d *advisoryDriver) Ping(ctx context.Context) error {
	return d.life.ClosedErr(d.onMain(ctx, func(s *session) error { return s.conn.Ping(ctx) }))
}

// onMain runs f on the main session, after life.Check.
func (d *advisoryDriver) onMain(ctx context.Context, f func(s *session) error) error {
	if err := d.life.Check(ctx); err != nil {
		return err
	}
	s, err := d.mainSession(ctx)
	if err != nil {
		return err
	}
	defer s.unlock()
	err = f(s)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		d.settle(s)
	}
	return err
}

// Close closes the pinned sessions, freeing their locks, and ends the
// subscriptions. Later calls fail with ErrClosed; calls in flight are cut
// when Close is done or ctx ends (its error).
func (d *advisoryDriver) Close(ctx context.Context) error {
	var sessions []*session
	return d.shutdown(ctx, func() {
		sessions = append(sessions, d.waiters...)
		if d.main != nil {
			sessions = append(sessions, d.main)
		}
		d.main, d.waiters, d.held = nil, nil, map[int64]*advLock{}
	}, func(ctx context.Context) error {
		var errs []error
		for _, s := range sessions {
			errs = append(errs, s.close(ctx)) // (Join drops the nils)
		}
		d.hup.Close()
		return errors.Join(errs...)
	})
}
