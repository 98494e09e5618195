package mysql

import (
	"context"
	"fmt"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// tableHandoverSQL passes the row to another token, with the next fence
// and a new expiry, when no driver queues for it, else releases it. The
// first assignment stores the outcome in LAST_INSERT_ID (the new fence, or
// heldMark + fence: released) for the others. Parameters: new token,
// driver id, ttl µs, name_hash, token. %[1]s the table, %[2]d heldMark.
const tableHandoverSQL = `UPDATE %[1]s SET
 fence = IF(LAST_INSERT_ID(IF(queue = '', fence + 1, %[2]d + fence)) < %[2]d, fence + 1, fence),
 token = IF(LAST_INSERT_ID() < %[2]d, ?, ''),
 taken_by = IF(LAST_INSERT_ID() < %[2]d, ?, taken_by),
 expires_at = IF(LAST_INSERT_ID() < %[2]d, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, '1000-01-01 00:00:00')
WHERE name_hash = ? AND token = ? AND expires_at >= UTC_TIMESTAMP(6)`

// Handover passes key from token to next.Token in one UPDATE when fair
// hand-off is on and no driver queues for the row; otherwise (without fair
// hand-off a waiting process would be overtaken) it releases key.
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
