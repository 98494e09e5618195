package postgres

import (
	"context"
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

// take runs the lock statement for h and registers l as the lock its session took.
func (d *advisoryDriver) take(ctx context.Context, h int64, l *advLock, req drivers.AcquireRequest) (uint64, bool, error) {
	wait := req.Wait
	if dl, ok := ctx.Deadline(); ok && wait > 0 {
		wait = min(wait, time.Until(dl))
	}
	var s *session
	var err error
	if wait > 0 && d.opts.MaxSessions > 1 {
		s, err = d.waiterSession(ctx)
	}
	if s == nil && err == nil { // no waiter session: one attempt without waiting
		wait = 0
		s, err = d.mainSession(ctx)
	}
	if err != nil {
		return 0, false, err
	}
	defer s.unlock()
	if err := d.identify(ctx, s, req.Token); err != nil {
		d.settle(s)
		return 0, false, err
	}
	var fence int64
	if wait > 0 {
		// lock_timeout in ms, at least 1 (0: no limit)
		timeout := strconv.FormatInt(max(wait.Milliseconds(), 1), 10)
		err = s.conn.QueryRow(ctx, d.sql.waitLock, h, timeout).Scan(&fence)
		// lock_timeout, deadlock, a cancel not ours: not acquired (a lock
		// granted as the timeout fired outlives the error: drop it)
		if state := sqlState(err); state == "55P03" || state == "40P01" || cancelledByOthers(ctx, err) {
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
	if s.dead.Load() || d.held[h] != l {
		return 0, false, errors.New("postgres: connection lost while acquiring")
	}
	l.fence, l.s = uint64(fence), s
	s.locks[h] = l
	s.holding.Store(true)
	return uint64(fence), true, nil
}

// identify ends s's application_name with token's identity (sqlkit.Identify), which Inspect shows.
func (d *advisoryDriver) identify(ctx context.Context, s *session, token string) error {
	return sqlkit.Identify(&s.ident, token, maxIdentity, func(id string) error {
		app := d.connCfg.RuntimeParams["application_name"]
		_, err := s.conn.Exec(ctx, d.sql.identify, app[:min(len(app), maxIdentity-len(id))]+id)
		return err
	})
}

// failed restores s after a failed lock statement, which may have taken
// the lock: it unlocks h, or closes s (idle, or when that fails).
func (d *advisoryDriver) failed(ctx context.Context, s *session, h int64) {
	if d.settle(s) {
		return
	}
	d.mu.Lock()
	idle := s.waiter && len(s.locks) == 0
	d.mu.Unlock()
	if idle || !d.drop(ctx, s, h) {
		d.broken(s)
		_ = s.closeConn(context.WithoutCancel(ctx))
	}
}

// drop unlocks h on s until s no longer holds it; false if it could not.
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

// releaseSlot takes s's slot for a release or handover: the statement's
// context outlives ctx by up to StallTimeout (failing that, it closes the
// connection, freeing its locks); it also returns the slot's release.
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
	if l == nil || l.s == nil || l.key != key || l.token != token || l.s.dead.Load() {
		return h, nil
	}
	return h, l
}

// unlock runs stmt, a release or handover, on token's session for key: 0
// when token did not hold key; 1 for a release; for a handover the new
// fence (kept for next) or -1 (a waiting session took it).
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
	if err != nil && d.settle(s) {
		err = nil // the session ended: the lock is gone
	} else if err != nil {
		d.failed(ctx, s, h) // unknown outcome: unlock before forgetting
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
	s.holding.Store(len(s.locks) > 0)
	return n, err
}

// heldOn returns the advisory keys s holds in the server: none when s died.
func (d *advisoryDriver) heldOn(ctx context.Context, s *session) (map[int64]bool, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.unlock()
	rows, _ := s.conn.Query(ctx, d.sql.heldKeys)
	keys, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil && d.settle(s) {
		return nil, nil
	}
	if err != nil || !d.alive(s) {
		return nil, err
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
	const lockKey = "((classid::bigint << 32) | objid::bigint)" // pg_locks' form of a bigint key (objsubid 1)
	const advisory = "FROM pg_locks AS l WHERE locktype = 'advisory' AND objsubid = 1 AND granted"
	const own = advisory + " AND l.pid = pg_backend_pid()"
	return advisoryStatements{
		// the fence (never 0) when the lock was free, else 0
		tryLock: "SELECT CASE WHEN pg_try_advisory_lock($1) THEN " + nextval + " ELSE 0 END",
		waitLock: "WITH t AS MATERIALIZED (SELECT set_config('lock_timeout', $2, false) AS v), " +
			"l AS MATERIALIZED (SELECT pg_advisory_lock($1) FROM t) " +
			"SELECT " + nextval + " FROM l",
		// 1 when unlocked, else 0; unlockNotify also notifies $2, the key
		unlock: "SELECT pg_advisory_unlock($1)::int",
		unlockNotify: "WITH u AS MATERIALIZED (SELECT pg_advisory_unlock($1) AS ok) " +
			"SELECT CASE WHEN NOT ok THEN 0 WHEN " + notify + " IS NULL THEN 1 ELSE 1 END FROM u",
		// unlocks, then locks again with a new fence unless a waiting
		// session was granted it as it unlocked: -1; 0 when it was not held
		handover: "WITH u AS MATERIALIZED (SELECT pg_advisory_unlock($1) AS ok) " +
			"SELECT CASE WHEN NOT ok THEN 0 WHEN pg_try_advisory_lock($1) THEN " + nextval + " ELSE -1 END FROM u",
		heldKeys: "SELECT " + lockKey + " " + own,
		heldKey:  "SELECT EXISTS (SELECT 1 " + own + " AND " + lockKey + " = $1)",
		// the holder's identity (identify), when held in this database
		holder: "SELECT coalesce((SELECT substring(a.application_name FROM '(~[^~]*~[^~]*~[0-9]+)$') " +
			"FROM pg_stat_activity AS a WHERE a.pid = l.pid), '') " +
			advisory + " AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND " +
			lockKey + " = $1 LIMIT 1",
		identify: "SELECT set_config('application_name', $1, false)",
	}
}

// advisoryKey is the first 8 bytes of key's sqlkit.KeyHash (keys with the
// same hash exclude each other).
func advisoryKey(key string) int64 { return int64(binary.BigEndian.Uint64(sqlkit.KeyHash(key))) }

// maxIdentity is how much of application_name PostgreSQL keeps.
const maxIdentity = 63
