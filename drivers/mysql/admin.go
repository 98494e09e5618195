package mysql

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
	if d.isClosed() {
		return nil, ErrClosed
	}
	if d.s.mode != ModeTable {
		return nil, drivers.ErrNotSupported
	}
	ctx, stop := d.bind(ctx)
	defer stop()
	defer func() { err = d.closedErr(err) }()
	if err := d.ensureSchema(ctx); err != nil {
		return nil, err
	}
	rows, err := d.db.QueryContext(ctx, fmt.Sprintf(
		`SELECT name, token, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM %s`+
			` WHERE expires_at >= UTC_TIMESTAMP(6) AND token <> '' AND LEFT(name, LENGTH(?)) = ?`, d.s.table),
		[]byte(prefix), []byte(prefix))
	if err != nil {
		return nil, fmt.Errorf("mysql: list: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var l drivers.ListedLock
		var name, token []byte
		var us int64
		if err := rows.Scan(&name, &token, &l.Fence, &us); err != nil {
			return nil, fmt.Errorf("mysql: list: %w", err)
		}
		l.Key, l.Token, l.TTL = string(name), string(token), time.Duration(us)*time.Microsecond
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: list: %w", err)
	}
	return out, nil
}
