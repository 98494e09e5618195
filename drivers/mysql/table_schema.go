package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// lockTableDDL is table mode's table (docs/mysql.md): name_hash is
// sqlkit.KeyHash, name the key for people. A release keeps the row for the
// next plain UPDATE; the reclaimer deletes it (table_reclaim.go). taken_by
// (the last taker) and queue serve fair hand-off (table_fair.go).
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
// COLUMN IF NOT EXISTS; another driver adding them first is fine).
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
