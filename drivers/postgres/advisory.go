package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// advAcquire takes an advisory lock: without waiting on the main session, or
// with a server-side wait (lock_timeout) on a waiter session, which then
// holds the lock. The fence is taken in the same statement.
func (d *Driver) advAcquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	h := advisoryKey(req.Key)
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return drivers.AcquireResult{}, ErrClosed
	}
	if _, busy := d.held[h]; busy {
		// held (or being taken) through this driver: its session would
		// re-enter the lock, so answer here.
		d.mu.Unlock()
		return drivers.AcquireResult{}, nil
	}
	l := &advLock{key: req.Key, token: req.Token, pending: true}
	d.held[h] = l
	d.mu.Unlock()

	fence, ok, err := d.advTake(ctx, h, req.Wait)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil && ok && d.held[h] != l {
		err = errors.New("postgres: connection lost while acquiring")
	}
	if err != nil || !ok {
		if d.held[h] == l {
			delete(d.held, h)
		}
		return drivers.AcquireResult{}, err
	}
	return drivers.AcquireResult{Acquired: true, Fence: fence}, nil
}

// advTake runs the lock statement and, on success, registers the lock on
// its session (l.s set) under d.mu.
func (d *Driver) advTake(ctx context.Context, h int64, wait time.Duration) (uint64, bool, error) {
	if wait > 0 {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			wait = time.Until(dl)
		}
	}
	var s *session
	var err error
	if wait > 0 && d.opts.MaxSessions > 1 {
		if s, err = d.waiterSession(ctx); err != nil {
			return 0, false, err
		}
	}
	if s == nil { // no waiter session free: one attempt without waiting
		wait = 0
		if s, err = d.mainSession(ctx); err != nil {
			return 0, false, err
		}
	}
	defer s.unlock()
	var fence int64
	if wait > 0 {
		err = s.conn.QueryRow(ctx, d.sql.waitLock, h, lockTimeout(wait)).Scan(&fence)
		// lock_timeout, deadlock, a cancel not this call's: not acquired...
		if state := sqlState(err); state == "55P03" || state == "40P01" || cancelledByOthers(ctx, err) {
			// ...unless the server granted the lock as the timeout fired:
			// a session lock outlives the statement's error, so this
			// session must not keep it unseen
			var held bool
			herr := s.conn.QueryRow(ctx, d.sql.heldKey, h).Scan(&held)
			if herr != nil || (held && !d.drop(ctx, s, h)) {
				d.failed(ctx, s, h)
			}
			return 0, false, nil
		}
	} else {
		err = s.conn.QueryRow(ctx, d.sql.tryLock, h).Scan(&fence)
	}
	if err != nil {
		if sqlState(err) == "42P01" {
			d.schemaLost()
		}
		d.failed(ctx, s, h)
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return 0, false, err
	}
	if fence == 0 { // taken (a fence is never 0)
		return 0, false, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.held[h]
	if s.dead || l == nil || !l.pending {
		return 0, false, errors.New("postgres: connection lost while acquiring")
	}
	l.pending, l.fence, l.s = false, uint64(fence), s
	s.locks[h] = l
	return uint64(fence), true, nil
}

// failed restores a session after a failed lock statement: the lock may
// have been taken before the failure (session locks survive the statement's
// rollback), so it is unlocked until the session no longer holds it. A
// waiter session holds nothing else and is simply closed.
func (d *Driver) failed(ctx context.Context, s *session, h int64) {
	if d.settle(s) {
		return
	}
	if s.waiter {
		d.mu.Lock()
		empty := len(s.locks) == 0
		d.mu.Unlock()
		if empty {
			d.kill(ctx, s)
			return
		}
	}
	if !d.drop(ctx, s, h) {
		d.kill(ctx, s) // could not clean up: give the session up
	}
}

// drop unlocks h on s until s no longer holds it, and reports whether it
// got there.
func (d *Driver) drop(ctx context.Context, s *session, h int64) bool {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.StallTimeout)
	defer cancel()
	for range 64 {
		var more bool
		if err := s.conn.QueryRow(cctx, d.sql.unlock, h).Scan(&more); err != nil {
			return false
		}
		if !more {
			return true
		}
	}
	return false
}

// releaseSlot takes s's statement slot for a release or a handover, and
// returns the context for its statement and the func that gives the slot
// back. An advisory lock never expires: a release given up while another
// statement held the slot (a renewal on a slow link) when the caller's ctx
// ended would leave the lock held for the session's whole life. So when
// ctx ends first, it waits on for the slot, bounded by StallTimeout, and
// the statement runs in that bound; when even that fails, it gives the
// session up (its locks are lost, reported as such) and closes the
// connection under the stuck statement, which frees them in the server.
func (d *Driver) releaseSlot(ctx context.Context, s *session) (context.Context, func(), error) {
	if s.lock(ctx) == nil {
		return ctx, s.unlock, nil
	}
	bounded, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.StallTimeout)
	if err := s.lock(bounded); err != nil {
		cancel()
		d.broken(s)
		s.watch.stop()
		s.closeOnce.Do(func() { _ = s.conn.PgConn().Conn().Close() })
		return nil, nil, fmt.Errorf("postgres: the session holding the lock stayed busy: %w", ctx.Err())
	}
	return bounded, func() { s.unlock(); cancel() }, nil
}

// ownLock returns the lock key's entry if token holds it through this driver.
func (d *Driver) ownLock(key, token string) (int64, *advLock) {
	h := advisoryKey(key)
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.held[h]
	if l == nil || l.pending || l.key != key || l.token != token || l.s == nil || l.s.dead {
		return h, nil
	}
	return h, l
}

// advRelease unlocks on the holding session. With server-side waits
// (MaxSessions > 1) the server hands the lock to its queued waiters, so the
// unlock is the bare statement; without them it notifies in the same
// statement, for the waiters that poll.
func (d *Driver) advRelease(ctx context.Context, key, token string) (bool, error) {
	h, l := d.ownLock(key, token)
	if l == nil {
		return false, nil
	}
	s := l.s
	ctx, done, err := d.releaseSlot(ctx, s)
	if err != nil {
		return false, err
	}
	defer done()
	var ok bool
	if d.opts.MaxSessions > 1 {
		err = s.conn.QueryRow(ctx, d.sql.unlock, h).Scan(&ok)
	} else {
		err = s.conn.QueryRow(ctx, d.sql.unlockNotify, h, payload(key)).Scan(&ok, nil)
	}
	if err != nil {
		if d.settle(s) {
			return false, nil // the session ended: the lock is gone
		}
		// unknown outcome: make sure it is unlocked before forgetting it
		d.failed(ctx, s, h)
	}
	d.mu.Lock()
	gone := d.held[h] != l || s.dead
	if !gone {
		delete(d.held, h)
		delete(s.locks, h)
	}
	d.mu.Unlock()
	if err != nil {
		return false, err
	}
	return ok && !gone, nil
}

// advExtend checks that the holding session still holds the lock (advisory
// locks do not expire).
func (d *Driver) advExtend(ctx context.Context, key, token string) (bool, error) {
	h, l := d.ownLock(key, token)
	if l == nil {
		return false, nil
	}
	s := l.s
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.unlock()
	var ok bool
	if err := s.conn.QueryRow(ctx, d.sql.heldKey, h).Scan(&ok); err != nil {
		if d.settle(s) {
			return false, nil
		}
		return false, err
	}
	return ok && d.alive(s), nil
}

// advRenew checks many leases with one statement per holding session.
func (d *Driver) advRenew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
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
			out[i] = drivers.RenewResult{Held: held[keys[i]], Err: err}
		}
	}
	return out
}

// heldOn returns the advisory keys session s holds in the server; none when
// the session broke.
func (d *Driver) heldOn(ctx context.Context, s *session) (map[int64]bool, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.unlock()
	rows, err := s.conn.Query(ctx, d.sql.heldKeys)
	held := map[int64]bool{}
	if err == nil {
		var k int64
		for rows.Next() {
			if err = rows.Scan(&k); err != nil {
				break
			}
			held[k] = true
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		if d.settle(s) {
			return nil, nil
		}
		return nil, err
	}
	if !d.alive(s) {
		return nil, nil
	}
	return held, nil
}

// advInspect reports a lock held through this driver in full; one held by
// another session only as held, with no token.
func (d *Driver) advInspect(ctx context.Context, key string) (drivers.LockInfo, bool, error) {
	h := advisoryKey(key)
	d.mu.Lock()
	l := d.held[h]
	if l != nil && !l.pending && l.key == key && l.s != nil && !l.s.dead {
		info := drivers.LockInfo{Token: l.token, Fence: l.fence}
		d.mu.Unlock()
		return info, true, nil
	}
	d.mu.Unlock()
	s, err := d.mainSession(ctx)
	if err != nil {
		return drivers.LockInfo{}, false, err
	}
	defer s.unlock()
	var ok bool
	if err := s.conn.QueryRow(ctx, d.sql.anyHolder, h).Scan(&ok); err != nil {
		d.settle(s)
		return drivers.LockInfo{}, false, err
	}
	return drivers.LockInfo{}, ok, nil
}

// advHandover passes the lock from token to next.Token on the session that
// holds it, with a new fence, in one statement: it unlocks and locks again.
// The server grants a released advisory lock to the sessions waiting for it
// in the server as it unlocks, so with one waiting the lock goes to that
// waiter instead, and a process that hands a lock among its own goroutines
// cannot keep it from the others. Without server-side waits (MaxSessions
// 1) other drivers' waiters poll, unseen: it releases as advRelease does.
func (d *Driver) advHandover(ctx context.Context, key, token string, next drivers.AcquireRequest) (bool, drivers.AcquireResult, error) {
	if d.opts.MaxSessions <= 1 {
		ok, err := d.advRelease(ctx, key, token)
		return ok, drivers.AcquireResult{}, err
	}
	h, l := d.ownLock(key, token)
	if l == nil {
		return false, drivers.AcquireResult{}, nil
	}
	s := l.s
	ctx, done, err := d.releaseSlot(ctx, s)
	if err != nil {
		return false, drivers.AcquireResult{}, err
	}
	defer done()
	var fence int64
	err = s.conn.QueryRow(ctx, d.sql.handover, h).Scan(&fence)
	if sqlState(err) == "42P01" {
		d.schemaLost()
	}
	if err != nil {
		if d.settle(s) {
			err = nil // the session ended: the lock is gone
		} else {
			// unknown outcome: make sure it is unlocked before forgetting it
			d.failed(ctx, s, h)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	gone := d.held[h] != l || s.dead
	switch {
	case err != nil || gone:
		if !gone {
			delete(d.held, h)
			delete(s.locks, h)
		}
		return false, drivers.AcquireResult{}, err
	case fence > 0:
		l.token, l.fence = next.Token, uint64(fence)
		return true, drivers.AcquireResult{Acquired: true, Fence: uint64(fence)}, nil
	}
	delete(d.held, h)
	delete(s.locks, h)
	return fence < 0, drivers.AcquireResult{}, nil
}
