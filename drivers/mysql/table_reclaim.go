package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// Table mode keeps a row per name only while it is needed: rows of names
// released or expired, that no driver queues for, are deleted by a
// goroutine of each driver that took locks in table mode, every half of
// the longest ttl it took one with (internal/reclaim), so that
// per-request names do not grow the table with traffic.
//
// A row's fence counts its name's acquisitions; a deleted row's count must
// not start again from 1. So the table has a one-row floor table (its name
// and floorSuffix): the reclaimer raises the floor to the highest fence of
// the rows it deletes, in the same transaction, and a new row starts one
// above the floor. Fences of a name stay increasing:
//
//   - an existing row's next fence is its own plus one, taken under its
//     row lock (every path that takes a row);
//   - a new row's fence is read from the floor before its insert meets (or
//     not) a row of the same name, under a shared lock on the floor row held
//     to its commit; the reclaimer takes the floor row's exclusive lock
//     (NOWAIT: it never makes acquisitions queue behind it) before it
//     reads or deletes a row, and holds it to its commit. So a
//     read of the floor and its insert happen either wholly before a
//     deletion commits (the insert then meets the row, and takes its fence
//     plus one) or wholly after it (the floor then is at least the deleted
//     row's fence).
//
// On Galera or Group Replication in multi-primary use, row locks are not
// shared between nodes: the argument holds for acquisitions on the node
// the reclaimer uses (single-primary set-ups, or one writer node).

// floorSuffix names a lock table's floor table.
const floorSuffix = "_floor"

const (
	floorTableDDL = `CREATE TABLE IF NOT EXISTS %s (
  id TINYINT UNSIGNED NOT NULL,
  fence BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (id)
) ENGINE=InnoDB`
	floorRowSQL = `INSERT IGNORE INTO %s (id, fence) VALUES (1, 0)`
)

// reclaimBatch is the most rows one reclaim transaction deletes.
const reclaimBatch = 1000

// noteTTL starts the reclaimer at the first table acquisition, or makes it
// run at least every ttl/2.
func (d *tableDriver) noteTTL(ttl time.Duration) {
	d.reclaim.Note(ttl, func(ctx context.Context) { _, _ = d.reclaimRows(ctx) })
}

// reclaimRows deletes the reclaimable rows, reclaimBatch per transaction,
// until one deletes fewer or ctx ends; it returns how many.
func (d *tableDriver) reclaimRows(ctx context.Context) (int64, error) {
	return sqlkit.Drain(ctx, reclaimBatch, d.reclaimBatch)
}

// reclaimBatch deletes up to reclaimBatch reclaimable rows, found by a
// plain read, in one transaction (READ COMMITTED: a locking read locks only
// the rows it returns) that locks the floor, then the rows, raises the
// floor to their highest fence and deletes them.
func (d *tableDriver) reclaimBatch(ctx context.Context) (int64, error) {
	const free = "expires_at < UTC_TIMESTAMP(6) AND queue = ''"
	// the candidates, before the floor is locked: new rows wait for it
	hashes, err := queryHashes(ctx, d.db, fmt.Sprintf("SELECT name_hash, 0 FROM %s WHERE %s LIMIT %d", d.s.table, free, reclaimBatch))
	if err != nil || len(hashes) == 0 {
		return 0, err
	}
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var floor uint64
	// NOWAIT: an acquisition holding the floor's shared lock may itself
	// wait for a row lock; waiting for it would queue every other new
	// row behind this transaction. The floor is tried again next round.
	if err := tx.QueryRowContext(ctx, fmt.Sprintf("SELECT fence FROM %s WHERE id = 1 FOR UPDATE NOWAIT", d.s.floorTable)).Scan(&floor); err != nil {
		if lockBusy(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("mysql: reclaim: floor: %w", err)
	}
	in := strings.TrimSuffix(strings.Repeat("?,", len(hashes)), ",")
	args := make([]any, len(hashes))
	for i, h := range hashes {
		args[i] = h.hash
	}
	// the candidates again, locked, as they are now
	locked, err := queryHashes(ctx, tx, fmt.Sprintf("SELECT name_hash, fence FROM %s WHERE name_hash IN (%s) AND %s FOR UPDATE", d.s.table, in, free), args...)
	if err != nil || len(locked) == 0 {
		return 0, err
	}
	top := floor
	args = args[:0]
	for _, h := range locked {
		top = max(top, h.fence)
		args = append(args, h.hash)
	}
	if top > floor {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET fence = ? WHERE id = 1", d.s.floorTable), top); err != nil {
			return 0, fmt.Errorf("mysql: reclaim: floor: %w", err)
		}
	}
	in = strings.TrimSuffix(strings.Repeat("?,", len(args)), ",")
	res, err := tx.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE name_hash IN (%s)", d.s.table, in), args...)
	if err != nil {
		return 0, fmt.Errorf("mysql: reclaim: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("mysql: reclaim: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// hashFence is a row's name_hash and fence.
type hashFence struct {
	hash  []byte
	fence uint64
}

// queryHashes runs q on db, a pool or a transaction, and returns its rows.
func queryHashes(ctx context.Context, db querier, q string, args ...any) ([]hashFence, error) {
	var out []hashFence
	var h hashFence
	err := queryRows(ctx, db, q, args, func() []any { return []any{&h.hash, &h.fence} }, func() { out = append(out, h) })
	if err != nil {
		return nil, fmt.Errorf("mysql: reclaim: %w", err)
	}
	return out, nil
}

// lockBusy reports a lock NOWAIT could not have: MariaDB answers a lock
// wait timeout (1205), MySQL ER_LOCK_NOWAIT (3572).
func lockBusy(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1205 || me.Number == 3572)
}
