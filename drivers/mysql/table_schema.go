package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// lockTableDDL is table mode's table (docs/mysql.md): name_hash is
// sqlkit.KeyHash, name the key for people. A release keeps the row for the
// next plain UPDATE; the reclaimer deletes it. taken_by (the last taker)
// and queue serve fair hand-off.
const lockTableDDL = `CREATE TABLE IF NOT EXISTS %s (
  name_hash BINARY(32) NOT NULL,
  token VARBINARY(255) NOT NULL,
  fence BIGINT UNSIGNED NOT NULL,
  expires_at DATETIME(6) NOT NULL,
  name MEDIUMBLOB NOT NULL,
  %s,
  %s,
  PRIMARY KEY (name_hash)
) ENGINE=InnoDB`

// fairColumns are the fair hand-off columns (added to older tables by
// addColumns; their wanted_by, wanted_since, wanted_until stay unused).
var fairColumns = []column{
	{"taken_by", "taken_by VARBINARY(16) NOT NULL DEFAULT ''"},
	{"queue", fmt.Sprintf("queue VARBINARY(%d) NOT NULL DEFAULT ''", maxQueue*entryWidth)},
}

// column is a column's name and definition.
type column struct{ name, def string }

// ensureSchema creates the lock table and its fence floor.
func (d *tableDriver) ensureSchema(ctx context.Context) error {
	if _, err := d.db.ExecContext(ctx, fmt.Sprintf(lockTableDDL, d.s.table, fairColumns[0].def, fairColumns[1].def)); err != nil {
		return fmt.Errorf("mysql: create table %s: %w", d.s.table, err)
	}
	if err := addColumns(ctx, d.db, d.s.table, fairColumns); err != nil {
		return err
	}
	for _, q := range []string{floorTableDDL, floorRowSQL} {
		if _, err := d.db.ExecContext(ctx, fmt.Sprintf(q, d.s.floorTable)); err != nil {
			return fmt.Errorf("mysql: create fence floor %s: %w", d.s.floorTable, err)
		}
	}
	return nil
}

// addColumns adds those of cols missing from table (MySQL 8 has no ADD
// COLUMN IF NOT EXISTS); another driver adding them first is fine.
func addColumns(ctx context.Context, db *sql.DB, table string, cols []column) error {
	parts := strings.Split(strings.ReplaceAll(table, "`", ""), ".")
	var schema any // NULL: the connection's database
	if len(parts) == 2 {
		schema = parts[0]
	}
	var have string
	if err := db.QueryRowContext(ctx, `SELECT CONCAT(',', IFNULL(GROUP_CONCAT(COLUMN_NAME), ''), ',') FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = IFNULL(?, DATABASE()) AND TABLE_NAME = ?`,
		schema, parts[len(parts)-1]).Scan(&have); err != nil {
		return fmt.Errorf("mysql: columns of %s: %w", table, err)
	}
	for _, c := range cols {
		if strings.Contains(have, ","+c.name+",") {
			continue
		}
		_, err := db.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s", table, c.def))
		if err != nil && errNumber(err) != 1060 { // 1060: duplicate column
			return fmt.Errorf("mysql: add column %s to %s: %w", c.name, table, err)
		}
	}
	return nil
}

// Each table-mode driver deletes the free rows no live waiter queues for
// (reclaimSQL) every half of the longest ttl it took a lock with. A
// deleted row's fence must not restart from 1: the deleting transaction
// raises the one-row floor table (name + floorSuffix) to the highest fence
// deleted, and a new row starts one above it. Fences stay increasing as:
//
//   - an existing row's next fence is its own plus one, under its row lock;
//   - a new row reads the floor under a shared lock held to its commit, and
//     the reclaimer locks the floor row exclusively before it reads or
//     deletes a row, to its commit. So a floor read and its insert happen
//     wholly before a deletion commits (the insert meets the row: its
//     fence plus one) or wholly after (the floor is at least the deleted
//     fence).
//
// Multi-primary Galera or Group Replication shares no row locks between
// nodes: this holds for acquisitions on the reclaimer's node.

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

// reclaimRound deletes up to reclaimBatch reclaimable rows, found by a
// plain read, in one READ COMMITTED transaction (a locking read locks only
// the rows it returns): lock the floor, then the rows, raise the floor,
// delete them.
func (d *tableDriver) reclaimRound(ctx context.Context) (int64, error) {
	// the candidates, before the floor is locked: new rows wait for it
	hashes, err := queryHashes(ctx, d.db, d.s.reclaimSQL("name_hash, 0", "TRUE")+fmt.Sprintf(" LIMIT %d", reclaimBatch))
	if err != nil || len(hashes) == 0 {
		return 0, err
	}
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var floor uint64
	// NOWAIT: waiting behind an acquisition's shared lock would queue every
	// new row behind this transaction; try again next round
	if err := tx.QueryRowContext(ctx, fmt.Sprintf("SELECT fence FROM %s WHERE id = 1 FOR UPDATE NOWAIT", d.s.floorTable)).Scan(&floor); err != nil {
		if isErr(err, 1205, 3572) { // busy: lock wait timeout (MariaDB), ER_LOCK_NOWAIT (MySQL)
			return 0, nil
		}
		return 0, fmt.Errorf("mysql: reclaim: floor: %w", err)
	}
	args := make([]any, len(hashes))
	for i, h := range hashes {
		args[i] = h.hash
	}
	// the candidates again, locked, as they are now
	locked, err := queryHashes(ctx, tx, d.s.reclaimSQL("name_hash, fence", "name_hash IN ("+marks("?", len(args))+")")+" FOR UPDATE", args...)
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
	res, err := tx.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE name_hash IN (%s)", d.s.table, marks("?", len(args))), args...)
	if err != nil {
		return 0, fmt.Errorf("mysql: reclaim: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("mysql: reclaim: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// reclaimSQL selects cols of the reclaimable rows matching where: free,
// and no live waiter queued (each entry dead as queueSQL.dead judges), or
// without fair hand-off no entry. mutexfx_entry numbers the entries.
func (s settings) reclaimSQL(cols, where string) string {
	if s.liveness == 0 {
		return fmt.Sprintf("SELECT %s FROM %s WHERE %s AND expires_at < UTC_TIMESTAMP(6) AND queue = ''", cols, s.table, where)
	}
	return fmt.Sprintf(`WITH RECURSIVE mutexfx_entry (i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM mutexfx_entry WHERE i < %[1]d)
SELECT %[2]s FROM %[3]s WHERE %[4]s AND expires_at < UTC_TIMESTAMP(6) AND (queue = '' OR NOT EXISTS (SELECT 1 FROM mutexfx_entry
 WHERE i < LENGTH(queue) DIV %[5]d AND SUBSTRING(queue, i * %[5]d + 17, 13) >= %[6]s))`,
		maxQueue-1, cols, s.table, where, entryWidth, stampSQL(s.liveness.Milliseconds()))
}

// hashFence is a row's name_hash and fence: the rows queryHashes returns.
type hashFence struct {
	hash  []byte
	fence uint64
}

func queryHashes(ctx context.Context, db querier, q string, args ...any) ([]hashFence, error) {
	var out []hashFence
	var h hashFence
	err := queryRows(ctx, db, q, args, []any{&h.hash, &h.fence}, func() { out = append(out, h) })
	if err != nil {
		return nil, fmt.Errorf("mysql: reclaim: %w", err)
	}
	return out, nil
}
