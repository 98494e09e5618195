package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"
)

// lockTableDDL is the table mode's table (documented in docs/mysql.md).
// name_hash is SHA-256(key): a fixed-size, case-exact primary key for keys
// of any length; name keeps the key for people reading the table. A
// release keeps the row (token emptied, expiry in the past), for the next
// acquisition's plain UPDATE; the reclaimer deletes it later, raising the
// fence floor (table_reclaim.go). taken_by (the driver that took the lock last) and queue
// (the drivers waiting for it) serve fair hand-off (see table_fair.go).
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

// fairColumns are the fair hand-off columns, added by ALTER TABLE to
// tables created by earlier versions (whose reservation columns wanted_by,
// wanted_since and wanted_until are then left unused).
var fairColumns = []column{
	{"taken_by", "taken_by VARBINARY(16) NOT NULL DEFAULT ''"},
	{"queue", fmt.Sprintf("queue VARBINARY(%d) NOT NULL DEFAULT ''", maxQueue*entryWidth)},
}

// column is a column added to tables created by earlier versions: its
// name and its definition.
type column struct{ name, def string }

// ensureSchema creates the lock table and its fence floor (run by
// core.schema).
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

// addColumns adds the columns cols missing from table, created by an
// earlier version (MySQL 8 has no ADD COLUMN IF NOT EXISTS, hence the
// look-up; a concurrent driver adding them first is fine).
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
		var me *gomysql.MySQLError
		if err != nil && !(errors.As(err, &me) && me.Number == 1060) { // 1060: duplicate column
			return fmt.Errorf("mysql: add column %s to %s: %w", c.name, table, err)
		}
	}
	return nil
}
