package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

var _ drivers.Inspector = (*Driver)(nil)

// Inspect describes the lock key. Table mode reads its row. Advisory mode
// asks the server whether anyone holds it; the token and fence are known
// only for locks held through this driver (another holder's are empty), and
// TTL is zero: advisory locks do not expire. Whether the holder is this
// driver's is told as a probe tells it (heldLock.holds), from the same
// statement, which reads the server's boot time too.
func (d *Driver) Inspect(ctx context.Context, key string) (info drivers.LockInfo, held bool, err error) {
	if d.isClosed() {
		return drivers.LockInfo{}, false, ErrClosed
	}
	ctx, stop := d.bind(ctx)
	defer stop()
	defer func() { err = d.closedErr(err) }()
	if d.s.mode == ModeTable {
		return d.tableInspect(ctx, key)
	}
	var id, boot sql.NullInt64
	q := func(boot string) string { return "SELECT IS_USED_LOCK(?), " + boot }
	if err := d.adv.queryBoot(ctx, q, []any{lockName(key)}, &id, &boot); err != nil {
		return drivers.LockInfo{}, false, fmt.Errorf("mysql: inspect: %w", err)
	}
	if !id.Valid {
		return drivers.LockInfo{}, false, nil
	}
	d.adv.mu.Lock()
	h := d.adv.held[key]
	d.adv.mu.Unlock()
	if h != nil && h.holds(id, boot) { // the id alone may be a restarted server's
		return drivers.LockInfo{Token: h.token, Fence: h.fence}, true, nil
	}
	return drivers.LockInfo{}, true, nil
}

func (d *Driver) tableInspect(ctx context.Context, key string) (drivers.LockInfo, bool, error) {
	if err := d.ensureSchema(ctx); err != nil {
		return drivers.LockInfo{}, false, err
	}
	var info drivers.LockInfo
	var us int64
	err := d.db.QueryRowContext(ctx, fmt.Sprintf(
		`SELECT token, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM %s WHERE name_hash = ? AND expires_at >= UTC_TIMESTAMP(6)`,
		d.s.table), keyHash(key)).Scan(&info.Token, &info.Fence, &us)
	if errors.Is(err, sql.ErrNoRows) {
		return drivers.LockInfo{}, false, nil
	}
	if err != nil {
		return drivers.LockInfo{}, false, fmt.Errorf("mysql: inspect: %w", err)
	}
	info.TTL = time.Duration(us) * time.Microsecond
	return info, true, nil
}
