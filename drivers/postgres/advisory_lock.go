package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// take runs the lock statement for h and, on success, registers the lock
// on its session (l.s set) under d.mu.
func (d *advisoryDriver) take(ctx context.Context, h int64, req drivers.AcquireRequest) (uint64, bool, error) {
	wait := req.Wait
	if dl, ok := ctx.Deadline(); ok && wait > 0 {
		wait = min(wait, time.Until(dl))
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
	if err := d.identify(ctx, s, req.Token); err != nil {
		d.settle(s)
		return 0, false, err
	}
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
			d.ddl.Lost()
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
	if s.dead.Load() || l == nil || !l.pending {
		return 0, false, errors.New("postgres: connection lost while acquiring")
	}
	l.pending, l.fence, l.s = false, uint64(fence), s
	s.locks[h] = l
	return uint64(fence), true, nil
}

// identify makes s show the identity of the token it takes a lock for
// (see identity) at the end of its application_name (after the one the
// connection configuration sets, cut to fit), so that other sessions can
// tell who holds the locks on s (Inspect). It costs a statement only when
// the identity changes: once per session for a process of one Mutex. A
// session's locks are all shown as held by its last acquisition's token
// (none when that token names no holder).
func (d *advisoryDriver) identify(ctx context.Context, s *session, token string) error {
	id := sqlkit.Identity(token, maxIdentity)
	if id == s.ident {
		return nil
	}
	app := d.connCfg.RuntimeParams["application_name"]
	if _, err := s.conn.Exec(ctx, d.sql.identify, app[:min(len(app), maxIdentity-len(id))]+id); err != nil {
		return err
	}
	s.ident = id
	return nil
}

// failed restores a session after a failed lock statement: the lock may
// have been taken before the failure (session locks survive the statement's
// rollback), so it is unlocked until the session no longer holds it. A
// waiter session holds nothing else and is simply closed.
func (d *advisoryDriver) failed(ctx context.Context, s *session, h int64) {
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
func (d *advisoryDriver) drop(ctx context.Context, s *session, h int64) bool {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.StallTimeout)
	defer cancel()
	for range 64 {
		var more bool
		if err := s.conn.QueryRow(cctx, "SELECT pg_advisory_unlock($1)", h).Scan(&more); err != nil {
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
func (d *advisoryDriver) releaseSlot(ctx context.Context, s *session) (context.Context, func(), error) {
	if s.lock(ctx) == nil {
		return ctx, s.unlock, nil
	}
	bounded, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.opts.StallTimeout)
	if err := s.lock(bounded); err != nil {
		cancel()
		d.broken(s)
		s.cut()
		return nil, nil, fmt.Errorf("postgres: the session holding the lock stayed busy: %w", ctx.Err())
	}
	return bounded, func() { s.unlock(); cancel() }, nil
}

// ownLock returns the lock key's entry if token holds it through this driver.
func (d *advisoryDriver) ownLock(key, token string) (int64, *advLock) {
	h := advisoryKey(key)
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.held[h]
	if l == nil || l.pending || l.key != key || l.token != token || l.s == nil || l.s.dead.Load() {
		return h, nil
	}
	return h, l
}

// unlock runs stmt, a release or a handover, with h (key's advisory key)
// and args on the session holding key for token, and returns its answer: 0 when token did not hold key; else
// 1 for a release; for a handover the new fence (> 0: the lock is kept,
// now for the token next) or -1 (released: a waiting session took it).
func (d *advisoryDriver) unlock(ctx context.Context, key, token, next, stmt string, args ...any) (int64, error) {
	h, l := d.ownLock(key, token)
	if l == nil {
		return 0, nil
	}
	s := l.s
	ctx, done, err := d.releaseSlot(ctx, s)
	if err != nil {
		return 0, err
	}
	defer done()
	var n int64
	if err = s.conn.QueryRow(ctx, stmt, append([]any{h}, args...)...).Scan(&n); sqlState(err) == "42P01" {
		d.ddl.Lost()
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
	if d.held[h] != l || s.dead.Load() {
		return 0, err
	}
	if err == nil && n > 0 && next != "" {
		l.token, l.fence = next, uint64(n)
		return n, nil
	}
	delete(d.held, h)
	delete(s.locks, h)
	return n, err
}

// heldOn returns the advisory keys session s holds in the server; none when
// the session broke.
func (d *advisoryDriver) heldOn(ctx context.Context, s *session) (map[int64]bool, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.unlock()
	rows, _ := s.conn.Query(ctx, d.sql.heldKeys)
	keys, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		if d.settle(s) {
			return nil, nil
		}
		return nil, err
	}
	if !d.alive(s) {
		return nil, nil
	}
	held := map[int64]bool{}
	for _, k := range keys {
		held[k] = true
	}
	return held, nil
}

// advisoryStatements are the advisory driver's SQL texts.
type advisoryStatements struct {
	tryLock, waitLock, unlock, unlockNotify, handover, heldKeys, heldKey, holder, identify string
}

func advisorySQL(n names) advisoryStatements {
	nextval := nextvalSQL(n)
	notify := fmt.Sprintf("CASE WHEN octet_length($2) BETWEEN 1 AND %d THEN pg_notify('%s', $2) END",
		maxPayload, strings.Trim(n.channel, `"`))
	// advisory keys as pg_locks shows them: classid is the high half, objid
	// the low half, objsubid 1 for the one-bigint form.
	const lockKey = "((classid::bigint << 32) | objid::bigint)"
	const advisory = "FROM pg_locks AS l WHERE locktype = 'advisory' AND objsubid = 1 AND granted"
	const own = advisory + " AND l.pid = pg_backend_pid()"
	return advisoryStatements{
		// one expression: the fence (never 0) when the lock was free, else 0
		tryLock: "SELECT CASE WHEN pg_try_advisory_lock($1) THEN " + nextval + " ELSE 0 END",
		waitLock: "WITH t AS MATERIALIZED (SELECT set_config('lock_timeout', $2, false) AS v), " +
			"l AS MATERIALIZED (SELECT pg_advisory_lock($1) FROM t) " +
			"SELECT " + nextval + " FROM l",
		// 1 when unlocked, else 0; unlockNotify then notifies the channel
		// with $2, the key
		unlock: "SELECT pg_advisory_unlock($1)::int",
		unlockNotify: "WITH u AS MATERIALIZED (SELECT pg_advisory_unlock($1) AS ok) " +
			"SELECT CASE WHEN NOT ok THEN 0 WHEN " + notify + " IS NULL THEN 1 ELSE 1 END FROM u",
		// unlocks, then takes the lock again with a new fence (> 0) when
		// nobody took it meanwhile: the server grants a released lock to
		// the sessions waiting for it in the same step (ProcLockWakeup),
		// so a waiting session gets it first and the statement answers -1;
		// 0 when the lock was not held
		handover: "WITH u AS MATERIALIZED (SELECT pg_advisory_unlock($1) AS ok) " +
			"SELECT CASE WHEN NOT ok THEN 0 WHEN pg_try_advisory_lock($1) THEN " + nextval + " ELSE -1 END FROM u",
		heldKeys: "SELECT " + lockKey + " " + own,
		heldKey:  "SELECT EXISTS (SELECT 1 " + own + " AND " + lockKey + " = $1)",
		// the identity at the end of the holding session's
		// application_name (identify), one row when the lock is held in
		// this database
		holder: "SELECT coalesce((SELECT substring(a.application_name FROM '(~[^~]*~[^~]*~[0-9]+)$') " +
			"FROM pg_stat_activity AS a WHERE a.pid = l.pid), '') " +
			advisory + " AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND " +
			lockKey + " = $1 LIMIT 1",
		identify: "SELECT set_config('application_name', $1, false)",
	}
}

// advisoryKey is the 64-bit advisory lock key of a lock key: the first 8
// bytes of its SHA-256. Two keys with the same hash exclude each other
// (false contention), nothing worse.
func advisoryKey(key string) int64 {
	sum := sha256.Sum256([]byte(key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// lockTimeout formats a Wait as a lock_timeout value in milliseconds, at
// least 1 (0 would mean no limit).
func lockTimeout(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10)
}

// maxIdentity is the longest identity a session shows in its
// application_name (PostgreSQL keeps 63 bytes of it).
const maxIdentity = 63
