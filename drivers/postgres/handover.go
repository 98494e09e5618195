package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/drivers"
)

var _ drivers.Handoverer = (*Driver)(nil)

// Handover passes key from token to next.Token, in one statement, when no
// other driver waits for it (table mode: queues in its row; advisory mode:
// waits in the server, see advHandover); otherwise it releases key as
// Release does.
func (d *Driver) Handover(ctx context.Context, key, token string, next drivers.AcquireRequest) (released bool, res drivers.AcquireResult, err error) {
	if err := d.check(ctx); err != nil {
		return false, drivers.AcquireResult{}, err
	}
	defer func() { err = d.closedErr(err) }()
	if d.opts.Mode == ModeAdvisory {
		return d.advHandover(ctx, key, token, next)
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
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		held = err == nil
		return err
	})
	if err != nil || !held {
		return false, drivers.AcquireResult{}, err
	}
	if handed {
		return true, drivers.AcquireResult{Acquired: true, Fence: uint64(fence)}, nil
	}
	d.wakeQueued(ctx, key, queue, now)
	return true, drivers.AcquireResult{}, nil
}
