package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

var _ drivers.Lister = (*Driver)(nil)

// List returns the held locks whose keys start with prefix, in table mode;
// advisory locks cannot be listed (drivers.ErrNotSupported).
func (d *Driver) List(ctx context.Context, prefix string) (out []drivers.ListedLock, err error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	if d.opts.Mode == ModeAdvisory {
		return nil, drivers.ErrNotSupported
	}
	defer func() { err = d.closedErr(err) }()
	q := "SELECT name, token, fence, extract(epoch FROM expires_at - now())::float8 * 1000 FROM " + d.names.table +
		" WHERE expires_at > now() AND token <> '' AND left(name, length($1)) = $1"
	err = d.run(ctx, func(ctx context.Context, p querier) error {
		out = out[:0]
		rows, err := p.Query(ctx, q, prefix)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var l drivers.ListedLock
			var fence int64
			var left float64
			if err := rows.Scan(&l.Key, &l.Token, &fence, &left); err != nil {
				return err
			}
			l.Fence = uint64(fence)
			l.TTL = time.Duration(left * float64(time.Millisecond))
			out = append(out, l)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list: %w", err)
	}
	return out, nil
}
