package mysql

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// heldMark offsets the holder's remaining microseconds that a failed
// acquisition returns through LAST_INSERT_ID, so that they cannot be taken
// for a fence (fences stay below 2^50: see fair.go).
const heldMark = 1 << 62

// Table mode statements (acquire: fair.go). The clock is always the
// database's (UTC_TIMESTAMP(6): the same for every session whatever its
// time_zone); a lock is expired when expires_at < now. %s is the validated,
// quoted table name; every value is a parameter.
const (
	// tableReleaseSQL frees the row if token holds it, keeping the row
	// (and its fence). LAST_INSERT_ID(fence) >= 1 tells that it matched.
	tableReleaseSQL = `UPDATE %s SET token = '', expires_at = '1000-01-01 00:00:00', fence = LAST_INSERT_ID(fence)
WHERE name_hash = ? AND token = ? AND expires_at >= UTC_TIMESTAMP(6)`

	// tableExtendSQL sets the expiry to ttl from now if token holds it.
	tableExtendSQL = `UPDATE %s SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, fence = LAST_INSERT_ID(fence)
WHERE name_hash = ? AND token = ? AND expires_at >= UTC_TIMESTAMP(6)`

	// tableRetakeSQL takes an existing row that is free (released or
	// expired) and that nobody queues for, or whose queue this driver
	// heads (it then leaves the queue), in a plain UPDATE; the new fence
	// is in LAST_INSERT_ID. It matches nothing, and writes nothing, when
	// the row is missing, held or queued for by another driver.
	// Assignments run left to right, each seeing the ones before: fence is
	// first, expires_at (which WHERE reads) after the others.
	// Parameters: token, ttl µs, driver id, name_hash, driver id.
	tableRetakeSQL = `UPDATE %s SET fence = LAST_INSERT_ID(fence + 1), token = ?, queue = SUBSTRING(queue, 30),
 expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, taken_by = ?
WHERE name_hash = ? AND expires_at < UTC_TIMESTAMP(6) AND (queue = '' OR LEFT(queue, 16) = ?)`
)

func (d *Driver) tableAcquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	if err := checkToken(req.Token); err != nil {
		return drivers.AcquireResult{}, err
	}
	if req.TTL <= 0 {
		return drivers.AcquireResult{}, fmt.Errorf("mysql: ttl %v must be positive in table mode", req.TTL)
	}
	d.noteTTL(req.TTL)
	var id int64
	var err error
	if !d.watch.watching(req.Key) {
		// Not waiting for this key: most likely its row exists and is
		// free. A plain UPDATE takes it; an INSERT … ON DUPLICATE KEY
		// UPDATE of an existing row costs the server far more (1.3-1.4×
		// a bare upsert-if-expired + DELETE pair against 1.05-1.09×,
		// measured side by side).
		var took bool
		err = d.tableExecRows(ctx, d.retakeSQL, func(id0, n int64) { id, took = id0, n == 1 },
			req.Token, req.TTL.Microseconds(), d.id, keyHash(req.Key), d.id)
		if err != nil {
			return drivers.AcquireResult{}, fmt.Errorf("mysql: acquire: %w", err)
		}
		if took {
			d.watch.remove(req.Key)
			return drivers.AcquireResult{Acquired: true, Fence: uint64(id & valueMask)}, nil
		}
	}
	args := []any{keyHash(req.Key), req.Token, req.TTL.Microseconds(), req.Key, d.id}
	// The short statement first: it takes a free row nobody else queues
	// for (or inserts a missing one) and changes nothing otherwise; then,
	// with fair hand-off, the queueing statement.
	err = d.tableExec(ctx, d.takeSQL, func(id0 int64) { id = id0 }, args...)
	if err == nil && id >= heldMark && d.s.liveness > 0 && !d.watch.queued(req.Key) {
		err = d.tableExec(ctx, d.acquireSQL, func(id0 int64) { id = id0 }, args...)
	}
	if err != nil {
		return drivers.AcquireResult{}, fmt.Errorf("mysql: acquire: %w", err)
	}
	switch {
	case id >= heldMark:
		ttl := time.Duration(id&valueMask) * time.Microsecond
		if retry := d.watch.failed(req.Key, id&(appendBit|refreshBit) != 0); retry > 0 && retry < ttl {
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

func (d *Driver) tableRelease(ctx context.Context, key, token string) (bool, error) {
	var id int64
	err := d.tableExec(ctx, fmt.Sprintf(tableReleaseSQL, d.s.table), func(id0 int64) { id = id0 }, keyHash(key), token)
	if err != nil {
		return false, fmt.Errorf("mysql: release: %w", err)
	}
	if id >= 1 {
		d.emit(drivers.Event{Kind: drivers.Released, Key: key})
	}
	return id >= 1, nil
}

func (d *Driver) tableExtend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, fmt.Errorf("mysql: ttl %v must be positive in table mode", ttl)
	}
	var id int64
	err := d.tableExec(ctx, fmt.Sprintf(tableExtendSQL, d.s.table), func(id0 int64) { id = id0 }, ttl.Microseconds(), keyHash(key), token)
	if err != nil {
		return false, fmt.Errorf("mysql: extend: %w", err)
	}
	return id >= 1, nil
}

// tableExec runs one statement with retries, creating the table again if
// it was dropped, and passes the OK packet's LAST_INSERT_ID to got.
func (d *Driver) tableExec(ctx context.Context, query string, got func(int64), args ...any) error {
	return d.tableExecRows(ctx, query, func(id, _ int64) { got(id) }, args...)
}

// tableExecRows is tableExec that also passes the rows affected.
func (d *Driver) tableExecRows(ctx context.Context, query string, got func(id, n int64), args ...any) error {
	recreated := false
	return d.retry(ctx, func() error {
		res, err := d.exec(ctx, query, args)
		if err != nil && missingTable(err) && !recreated {
			recreated = true
			d.schemaGone()
			if err := d.ensureSchema(ctx); err != nil {
				return err
			}
			res, err = d.exec(ctx, query, args)
		}
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		got(id, n)
		return nil
	})
}

// checkToken rejects tokens the token column cannot hold.
func checkToken(token string) error {
	if token == "" || len(token) > 255 {
		return fmt.Errorf("mysql: token of %d bytes: must be 1 to 255", len(token))
	}
	return nil
}
