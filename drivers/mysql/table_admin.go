package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// Inspect reads key's row: its token, fence and remaining ttl.
func (d *tableDriver) Inspect(ctx context.Context, key string) (drivers.LockInfo, bool, error) {
	return call2(&d.core, ctx, func(ctx context.Context) (info drivers.LockInfo, _ bool, err error) {
		if err := d.ddl.Ensure(ctx, d.ensureSchema); err != nil {
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
		if err := d.ddl.Ensure(ctx, d.ensureSchema); err != nil {
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
