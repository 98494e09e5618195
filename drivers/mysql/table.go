package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
	"github.com/mutexfx/mutexfx/internal/backoff"
)

// tableDriver holds each lock as a row whose expiry the database's clock
// computes (ModeTable): it works on clusters.
type tableDriver struct {
	core

	id                     []byte // random: this driver in waiter queues (table_fair.go)
	retakeSQL, handoverSQL string
	takeSQL, acquireSQL    string // the short and the queueing acquire statements

	watch   watcher          // wake-ups and queue places (table_watch.go)
	reclaim sqlkit.Reclaimer // deletes the rows no longer needed (table_schema.go)
}

func newTable(db *sql.DB, own bool, socks *sockets, s settings) *tableDriver {
	d := &tableDriver{id: make([]byte, 16)}
	d.init(d, db, own, socks, s)
	_, _ = rand.Read(d.id) // never fails (crypto/rand)
	d.takeSQL, d.acquireSQL = s.takeSQL(), s.acquireSQL()
	d.retakeSQL = fmt.Sprintf(tableRetakeSQL, s.table)
	d.handoverSQL = fmt.Sprintf(tableHandoverSQL, s.table, heldMark)
	d.watch = watcher{d: d, keys: map[string]*interest{}}
	d.reclaim.Batch, d.reclaim.Round = reclaimBatch, d.reclaimRound
	return d
}

// Features reports the table locks' properties.
func (d *tableDriver) Features() drivers.Features {
	return drivers.Features{Expiring: true, ServerTime: true, Fencing: true, Scope: "cluster", MinTTL: 500 * time.Millisecond}
}

// Release frees key if token holds it.
func (d *tableDriver) Release(ctx context.Context, key, token string) (bool, error) {
	id, err := d.update(ctx, "release", tableReleaseSQL, sqlkit.KeyHash(key), token)
	if id&appendBit != 0 { // others queue: this driver's next attempt joins them
		d.watch.contended(key)
	}
	if id >= 1 {
		d.subs.Publish(drivers.Event{Kind: drivers.Released, Key: key})
	}
	return id >= 1, err
}

// Extend renews key for token for ttl.
func (d *tableDriver) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	if ttl <= 0 && !d.life.Closed() { // closed: ErrClosed, as every call
		return false, errTTL(ttl)
	}
	id, err := d.update(ctx, "extend", tableExtendSQL, ttl.Microseconds(), sqlkit.KeyHash(key), token)
	return id >= 1, err
}

// update runs op's statement q (%s: the table): LAST_INSERT_ID >= 1 if
// it matched the row.
func (d *tableDriver) update(ctx context.Context, op, q string, args ...any) (int64, error) {
	return call(&d.core, ctx, func(ctx context.Context) (int64, error) {
		id, _, err := d.tableExec(ctx, fmt.Sprintf(q, d.s.table), args...)
		if err != nil {
			return 0, fmt.Errorf("mysql: %s: %w", op, err)
		}
		return id, nil
	})
}

// Close stops the driver's goroutines and closes its own pool, as
// advisory mode's Close.
func (d *tableDriver) Close(ctx context.Context) error {
	return d.core.close(ctx, func() {
		d.watch.close()
		d.reclaim.Stop()
	})
}

// heldMark offsets what a failed acquisition returns in LAST_INSERT_ID (the
// holder's remaining µs) above any fence (< 2^50: table_fair.go).
const heldMark = 1 << 62

// Table mode statements (acquire: table_fair.go), %s the table. The first
// assignment stores the outcome in LAST_INSERT_ID, the later ones read it;
// expires_at, which WHERE reads, is assigned last.
const (
	// tableReleaseSQL frees the row (kept, with its fence) if token holds
	// it. LAST_INSERT_ID: the fence, + appendBit when others queue.
	tableReleaseSQL = `UPDATE %s SET token = '', expires_at = '1000-01-01 00:00:00',
 fence = LAST_INSERT_ID(fence | IF(queue = '', 0, 1 << 55)) & ((1 << 50) - 1)
WHERE name_hash = ? AND token = ? AND expires_at >= UTC_TIMESTAMP(6)`

	// tableExtendSQL sets the expiry to ttl from now if token holds it.
	tableExtendSQL = `UPDATE %s SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, fence = LAST_INSERT_ID(fence)
WHERE name_hash = ? AND token = ? AND expires_at >= UTC_TIMESTAMP(6)`

	// tableRetakeSQL takes an existing free row nobody queues for, or whose
	// queue this driver heads (and leaves): the new fence in LAST_INSERT_ID.
	// Parameters: token, ttl µs, driver id, name_hash, driver id.
	tableRetakeSQL = `UPDATE %s SET fence = LAST_INSERT_ID(` + nextFence + `), token = ?, queue = SUBSTRING(queue, 30),
 expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, taken_by = ?
WHERE name_hash = ? AND expires_at < UTC_TIMESTAMP(6) AND (queue = '' OR LEFT(queue, 16) = ?)`

	// tableHandoverSQL passes the row to another token (next fence, new
	// expiry) when no driver queues for it, else releases it:
	// LAST_INSERT_ID is the new fence, or heldMark + fence (released).
	// Parameters: new token, driver id, ttl µs, name_hash, token.
	tableHandoverSQL = `UPDATE %[1]s SET
 fence = IF(LAST_INSERT_ID(IF(queue = '', ` + nextFence + `, %[2]d + fence)) < %[2]d, ` + nextFence + `, fence),
 token = IF(LAST_INSERT_ID() < %[2]d, ?, ''),
 taken_by = IF(LAST_INSERT_ID() < %[2]d, ?, taken_by),
 expires_at = IF(LAST_INSERT_ID() < %[2]d, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, '1000-01-01 00:00:00')
WHERE name_hash = ? AND token = ? AND expires_at >= UTC_TIMESTAMP(6)`
)

func (d *tableDriver) acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	if err := checkTake(req); err != nil {
		return drivers.AcquireResult{}, err
	}
	d.reclaim.Note(req.TTL)
	start := time.Now() // no stamp this call writes is older
	var id, n int64
	var err error
	args := []any{sqlkit.KeyHash(req.Key), req.Token, req.TTL.Microseconds(), req.Key, d.id}
	plan := d.watch.plan(req.Key)
	if plan == planRetake || plan == planHead {
		// Its row most likely exists and is free: a plain UPDATE costs
		// 1.05-1.09× a bare upsert + DELETE, an upsert 1.3-1.4×. The queue's
		// head asks with it alone: it locks a held row only for a moment.
		id, n, err = d.tableExec(ctx, d.retakeSQL, req.Token, req.TTL.Microseconds(), d.id, sqlkit.KeyHash(req.Key), d.id)
	}
	switch {
	case err != nil:
	case plan == planHead && n != 1:
		id = heldMark + d.s.fastPoll().Microseconds() // held: ask again in a fast poll
	case plan == planQueue: // only the queueing statement can take, join or stamp
		id, _, err = d.tableExec(ctx, d.acquireSQL, args...)
	case n != 1: // the short statement (a free row nobody else queues for, or a new one), then the queueing one
		id, _, err = d.tableExec(ctx, d.takeSQL, args...)
		if err == nil && id >= heldMark && d.s.liveness > 0 {
			id, _, err = d.tableExec(ctx, d.acquireSQL, args...)
		}
	}
	if err != nil {
		if res, ok := d.tookAnyway(ctx, req, err); ok {
			d.watch.remove(req.Key)
			return res, nil
		}
		return drivers.AcquireResult{}, fmt.Errorf("mysql: acquire: %w", err)
	}
	switch {
	case id >= heldMark:
		ttl := time.Duration(id&valueMask) * time.Microsecond
		if retry := d.watch.failed(req.Key, id&(appendBit|refreshBit) != 0, start); retry > 0 && retry < ttl {
			ttl = retry
		}
		return drivers.AcquireResult{HolderTTL: ttl}, nil
	case id >= 1:
		d.watch.remove(req.Key)
		return drivers.AcquireResult{Acquired: true, Fence: uint64(id & valueMask)}, nil
	default:
		return drivers.AcquireResult{}, errors.New("mysql: acquire: no answer in LAST_INSERT_ID (statement rewritten by a proxy?)")
	}
}

// tookAnyway reads req.Key's row back after err when the statement may
// have taken the lock (and left the queue) unseen: the link failed after
// sending it (no server error, not driver.ErrBadConn), ctx alive. Else the
// component would release it and queue again at the back. ok: req.Token
// holds the row.
func (d *tableDriver) tookAnyway(ctx context.Context, req drivers.AcquireRequest, err error) (res drivers.AcquireResult, ok bool) {
	if ctx.Err() != nil || errNumber(err) != 0 || errors.Is(err, driver.ErrBadConn) {
		return res, false // answered, or nothing sent
	}
	info, held, ierr := d.Inspect(ctx, req.Key)
	if ierr != nil || !held || info.Token != req.Token || info.Fence == 0 {
		return res, false
	}
	return drivers.AcquireResult{Acquired: true, Fence: info.Fence}, true
}

// Handover passes key from token to next.Token in one UPDATE when fair
// hand-off is on and no driver queues for the row; otherwise it releases
// key (else a waiting process would be overtaken).
func (d *tableDriver) Handover(ctx context.Context, key, token string, next drivers.AcquireRequest) (released bool, res drivers.AcquireResult, err error) {
	if d.s.liveness == 0 {
		ok, err := d.Release(ctx, key, token)
		return ok, drivers.AcquireResult{}, err
	}
	return call2(&d.core, ctx, func(ctx context.Context) (bool, drivers.AcquireResult, error) {
		if err := checkTake(next); err != nil {
			return false, drivers.AcquireResult{}, err
		}
		id, n, err := d.tableExec(ctx, d.handoverSQL, next.Token, d.id, next.TTL.Microseconds(), sqlkit.KeyHash(key), token)
		switch {
		case err != nil:
			return false, drivers.AcquireResult{}, fmt.Errorf("mysql: handover: %w", err)
		case n != 1:
			return false, drivers.AcquireResult{}, nil
		case id < heldMark:
			return true, drivers.AcquireResult{Acquired: true, Fence: uint64(id)}, nil
		}
		d.watch.contended(key) // released because others queue
		d.subs.Publish(drivers.Event{Kind: drivers.Released, Key: key})
		return true, drivers.AcquireResult{}, nil
	})
}

// Inspect reads key's row: its token, fence and remaining ttl.
func (d *tableDriver) Inspect(ctx context.Context, key string) (drivers.LockInfo, bool, error) {
	return call2(&d.core, ctx, func(ctx context.Context) (info drivers.LockInfo, _ bool, err error) {
		if err := d.ready(ctx); err != nil {
			return info, false, err
		}
		var us int64
		err = d.db.QueryRowContext(ctx, fmt.Sprintf(
			`SELECT token, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM %s WHERE name_hash = ? AND expires_at >= UTC_TIMESTAMP(6)`,
			d.s.table), sqlkit.KeyHash(key)).Scan(&info.Token, &info.Fence, &us)
		if errors.Is(err, sql.ErrNoRows) {
			return drivers.LockInfo{}, false, nil
		}
		if err != nil {
			return drivers.LockInfo{}, false, fmt.Errorf("mysql: inspect: %w", err)
		}
		info.TTL = time.Duration(us) * time.Microsecond
		return info, true, nil
	})
}

// List returns the held locks whose keys start with prefix.
func (d *tableDriver) List(ctx context.Context, prefix string) ([]drivers.ListedLock, error) {
	return call(&d.core, ctx, func(ctx context.Context) (out []drivers.ListedLock, err error) {
		if err := d.ready(ctx); err != nil {
			return nil, err
		}
		var l drivers.ListedLock
		var name, token []byte
		var us int64
		err = queryRows(ctx, d.db, fmt.Sprintf(
			`SELECT name, token, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM %s`+
				` WHERE expires_at >= UTC_TIMESTAMP(6) AND token <> '' AND LEFT(name, LENGTH(?)) = ?`, d.s.table),
			[]any{[]byte(prefix), []byte(prefix)}, []any{&name, &token, &l.Fence, &us}, func() {
				l.Key, l.Token, l.TTL = string(name), string(token), time.Duration(us)*time.Microsecond
				out = append(out, l)
			})
		if err != nil {
			return nil, fmt.Errorf("mysql: list: %w", err)
		}
		return out, nil
	})
}

// tableExec runs a statement with retries, recreating a dropped table; it
// returns LAST_INSERT_ID and the rows affected.
func (d *tableDriver) tableExec(ctx context.Context, query string, args ...any) (id, n int64, err error) {
	err = d.ddl.Run(func() error { return d.ready(ctx) }, missingTable, func() error {
		return d.retry(ctx, func() error {
			res, err := d.exec(ctx, query, args)
			if err != nil {
				return err
			}
			if id, err = res.LastInsertId(); err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
	})
	return id, n, err
}

// retryPolicy spaces a statement's retries: 5 ms doubling to 20 ms.
var retryPolicy = backoff.Policy{Start: 5 * time.Millisecond, Cap: 20 * time.Millisecond}

// retry runs f again, up to d.s.retries times, while it fails retryable
// or, ctx alive, interrupted (1317: an operator's KILL QUERY; the driver
// closes connections instead): rolled back, it can run again.
func (d *tableDriver) retry(ctx context.Context, f func() error) error {
	return sqlkit.Retry(ctx, retryPolicy, f, func(attempt int, err error) bool {
		return attempt <= d.s.retries && (retryable(err) || isErr(err, 1317) && ctx.Err() == nil)
	})
}

// checkTake rejects a request the row cannot hold.
func checkTake(req drivers.AcquireRequest) error {
	if err := checkToken(req.Token); err != nil || req.TTL > 0 {
		return err
	}
	return errTTL(req.TTL)
}

func errTTL(ttl time.Duration) error {
	return fmt.Errorf("mysql: ttl %v must be positive in table mode", ttl)
}
