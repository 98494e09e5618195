package mysql

import (
	"context"
	"fmt"
	"strings"
)

// lockTableDDL is the table mode's table (documented in docs/mysql.md).
// name_hash is SHA-256(key): a fixed-size, case-exact primary key for keys
// of any length; name keeps the key for people reading the table. Rows stay
// after release (token emptied, expiry in the past) so that the key's fence
// keeps growing.
const lockTableDDL = `CREATE TABLE IF NOT EXISTS %s (
  name_hash BINARY(32) NOT NULL,
  token VARBINARY(255) NOT NULL,
  fence BIGINT UNSIGNED NOT NULL,
  expires_at DATETIME(6) NOT NULL,
  name MEDIUMBLOB NOT NULL,
  PRIMARY KEY (name_hash)
) ENGINE=InnoDB`

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
		if _, err := d.db.ExecContext(ctx, fmt.Sprintf(lockTableDDL, d.s.table)); err != nil {
			return fmt.Errorf("mysql: create table %s: %w", d.s.table, err)
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

// schemaGone makes the next call create the schema again.
func (d *Driver) schemaGone() {
	d.schemaMu.Lock()
	d.schemaOK = false
	d.schemaMu.Unlock()
}

// fenceSource returns the resolved advisory fence source.
func (d *Driver) fenceSource() string {
	d.schemaMu.Lock()
	defer d.schemaMu.Unlock()
	return d.fence
}
