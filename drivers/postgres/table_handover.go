package postgres

import (
	"context"

	"github.com/mutexfx/mutexfx/drivers"
)

// Handover passes key from token to next.Token, in one statement, when no
// other driver queues for it in its row; otherwise it releases key as
// Release does, and wakes the first queued driver.
func (d *tableDriver) Handover(ctx context.Context, key, token string, next drivers.AcquireRequest) (released bool, res drivers.AcquireResult, err error) {
	if err := d.check(ctx); err != nil {
		return false, drivers.AcquireResult{}, err
	}
	ms, err := ttlMillis(next.TTL)
	if err != nil {
		return false, drivers.AcquireResult{}, err
	}
	var held, handed bool
	var fence int64
	var queue []byte
	var now *float64
	err = d.run(ctx, func(ctx context.Context, p querier) error {
		held, handed, queue, now = false, false, nil, nil
		fs, mark := d.fencing(p)
		err := p.QueryRow(ctx, fs.handover, append([]any{rowID(key), token, next.Token, ms}, mark...)...).Scan(nil, &handed, &fence, &queue, &now)
		held = err == nil
		return ignoreNoRows(err)
	})
	if err != nil || !held {
		return false, drivers.AcquireResult{}, d.closedErr(err)
	}
	if handed {
		return true, drivers.AcquireResult{Acquired: true, Fence: uint64(fence)}, nil
	}
	d.wakeQueued(ctx, key, queue, now)
	return true, drivers.AcquireResult{}, nil
}
