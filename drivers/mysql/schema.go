package mysql

import (
	"context"
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
// fence floor (reclaim.go). taken_by (the driver that took the lock last) and queue
// (the drivers waiting for it) serve fair hand-off (see fair.go).
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
var fairColumns = [...]struct{ name, def string }{
	{"taken_by", "taken_by VARBINARY(16) NOT NULL DEFAULT ''"},
	{"queue", fmt.Sprintf("queue VARBINARY(%d) NOT NULL DEFAULT ''", maxQueue*entryWidth)},
}

// fenceSequenceDDL is the advisory mode's fence source on MariaDB. CACHE
// 1000 keeps NEXTVAL from writing (and syncing) on every acquisition; a
// restart skips the rest of the cached range, so fences still only grow.
const fenceSequenceDDL = `CREATE SEQUENCE IF NOT EXISTS %s START WITH 1 INCREMENT BY 1 CACHE 1000 ENGINE=InnoDB`

// fenceCounterDDL is the advisory mode's fence source elsewhere (MySQL 8).
const fenceCounterDDL = `CREATE TABLE IF NOT EXISTS %s (
  name_hash BINARY(32) NOT NULL,
  fence BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (name_hash)
) ENGINE=InnoDB`

// ensureSchema creates what the mode needs, once per driver (again after a
// statement found it missing).
func (d *Driver) ensureSchema(ctx context.Context) error {
	d.schemaMu.Lock()
	defer d.schemaMu.Unlock()
	if d.schemaOK {
		return nil
	}
	if d.s.mode == ModeTable {
		if _, err := d.db.ExecContext(ctx, fmt.Sprintf(lockTableDDL, d.s.table, fairColumns[0].def, fairColumns[1].def)); err != nil {
			return fmt.Errorf("mysql: create table %s: %w", d.s.table, err)
		}
		if err := d.addFairColumns(ctx); err != nil {
			return err
		}
		for _, q := range []string{floorTableDDL, floorRowSQL} {
			if _, err := d.db.ExecContext(ctx, fmt.Sprintf(q, d.s.floorTable)); err != nil {
				return fmt.Errorf("mysql: create fence floor %s: %w", d.s.floorTable, err)
			}
		}
		d.schemaOK = true
		return nil
	}
	fence := d.s.fence
	if fence == FenceAuto {
		var version string
		if err := d.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
			return fmt.Errorf("mysql: server version: %w", err)
		}
		fence = FenceCounter
		if strings.Contains(strings.ToLower(version), "mariadb") {
			fence = FenceSequence
		}
	}
	tmpl := map[string]string{FenceSequence: advSequenceSQL, FenceUUIDShort: advUUIDShortSQL, FenceCounter: advCounterSQL}[fence]
	for i, timeout := range []string{"0", "? / 1000"} {
		q := fmt.Sprintf(tmpl, d.s.fenceTable, timeout)
		d.advSQL[i] = [2]string{q, ""}
		if fence != FenceCounter { // a SELECT: the session's columns follow
			d.advSQL[i][1] = q + ", " + sessionSQL
		}
	}
	ddl := fenceCounterDDL
	switch fence {
	case FenceSequence:
		ddl = fenceSequenceDDL
	case FenceUUIDShort:
		ddl = ""
	}
	if ddl == "" {
		d.fence, d.schemaOK = fence, true
		return nil
	}
	if _, err := d.db.ExecContext(ctx, fmt.Sprintf(ddl, d.s.fenceTable)); err != nil {
		return fmt.Errorf("mysql: create fence %s %s: %w", fence, d.s.fenceTable, err)
	}
	d.fence = fence
	d.schemaOK = true
	return nil
}

// addFairColumns adds the fair hand-off columns missing from a lock table
// created by an earlier version (MySQL 8 has no ADD COLUMN IF NOT EXISTS,
// hence the look-up; a concurrent driver adding them first is fine).
func (d *Driver) addFairColumns(ctx context.Context) error {
	parts := strings.Split(strings.ReplaceAll(d.s.table, "`", ""), ".")
	var schema any // NULL: the connection's database
	if len(parts) == 2 {
		schema = parts[0]
	}
	var have string
	if err := d.db.QueryRowContext(ctx, `SELECT CONCAT(',', IFNULL(GROUP_CONCAT(COLUMN_NAME), ''), ',') FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = IFNULL(?, DATABASE()) AND TABLE_NAME = ? AND COLUMN_NAME IN ('taken_by', 'queue')`,
		schema, parts[len(parts)-1]).Scan(&have); err != nil {
		return fmt.Errorf("mysql: columns of %s: %w", d.s.table, err)
	}
	for _, c := range fairColumns {
		if strings.Contains(have, ","+c.name+",") {
			continue
		}
		_, err := d.db.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s", d.s.table, c.def))
		var me *gomysql.MySQLError
		if err != nil && !(errors.As(err, &me) && me.Number == 1060) { // 1060: duplicate column
			return fmt.Errorf("mysql: add column %s to %s: %w", c.name, d.s.table, err)
		}
	}
	return nil
}

// schemaGone makes the next call create the schema again.
func (d *Driver) schemaGone() {
	d.schemaMu.Lock()
	d.schemaOK = false
	d.schemaMu.Unlock()
}

// advisorySQL returns the resolved advisory fence source and its acquire
// statement, with a timeout parameter or none (0), and the same statement
// also reading the connection's session (sequence and uuid_short fences).
func (d *Driver) advisorySQL(wait bool) (fence, query, withSession string) {
	d.schemaMu.Lock()
	defer d.schemaMu.Unlock()
	i := 0
	if wait {
		i = 1
	}
	return d.fence, d.advSQL[i][0], d.advSQL[i][1]
}
