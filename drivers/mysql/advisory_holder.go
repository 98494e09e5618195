package mysql

import (
	"context"
	"fmt"

	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// Who holds an advisory lock another process took: the server tells only
// the holding connection's id (IS_USED_LOCK), so the driver writes, with
// that id and the server's clock, the holder's identity (sqlkit.Identity):
// in the key's counter row, by the acquire statement (fence counter), or,
// on the own pool, in the holder table row of the connection's slot (id
// modulo holderSlots) when the connection's identity changed (sequence and
// uuid_short). Inspect shows the identity only when the row names the
// holding connection and was written after the boot (ids restart from 1);
// any other lock is held by an unknown holder.

// holderColumns are the counter table's holder columns.
var holderColumns = []column{
	{"holder", "holder VARBINARY(255) NOT NULL DEFAULT ''"},
	{"conn_id", "conn_id BIGINT UNSIGNED NOT NULL DEFAULT 0"},
	{"taken_at", "taken_at BIGINT NOT NULL DEFAULT 0"},
}

// holderSuffix names the holder table after the fence table.
const holderSuffix = "_holder"

// holderSlots bounds the holder table's rows: ids equal modulo it share a
// row (its last writer is shown).
const holderSlots = 65536

// holderTableDDL is the holder table of the sequence and uuid_short fences.
var holderTableDDL = `CREATE TABLE IF NOT EXISTS %s (
  slot INT UNSIGNED NOT NULL,
  ` + holderColumns[0].def + `,
  ` + holderColumns[1].def + `,
  ` + holderColumns[2].def + `,
  PRIMARY KEY (slot)
) ENGINE=InnoDB`

// identifySQL writes the connection's identity in its slot of table %s.
var identifySQL = `INSERT INTO %s (slot, holder, conn_id, taken_at) VALUES (CONNECTION_ID() MOD ` + fmt.Sprint(holderSlots) +
	`, ?, CONNECTION_ID(), ` + takenSQL + `) ON DUPLICATE KEY UPDATE holder = ?, conn_id = CONNECTION_ID(), taken_at = ` + takenSQL

// holderSQL reads IS_USED_LOCK of the name (the last parameter), the boot
// time (%[2]s) and the identity in the row of %[1]s that %[3]s selects, if
// it names that holder and was written after the boot (+%[4]d s).
const holderSQL = `SELECT u.id, u.boot, (SELECT f.holder FROM %[1]s AS f WHERE %[3]s AND f.conn_id = u.id
 AND f.taken_at > u.boot + %[4]d) FROM (SELECT IS_USED_LOCK(?) AS id, %[2]s AS boot) AS u`

// ensureHolders adds the holder columns to the counter table, or creates
// the holder table, and reports whether holders are kept: not when the
// server refuses (no grant, read-only): an upgrade never stops acquisitions.
func (a *advisoryDriver) ensureHolders(ctx context.Context, fence string) (bool, error) {
	var err error
	if fence == FenceCounter {
		err = addColumns(ctx, a.db, a.s.fenceTable, holderColumns)
	} else if _, err = a.db.ExecContext(ctx, fmt.Sprintf(holderTableDDL, a.s.holderTable)); err != nil {
		err = fmt.Errorf("mysql: create holder table %s: %w", a.s.holderTable, err)
	}
	if errNumber(err) != 0 {
		return false, nil
	}
	return err == nil, err
}

// holderQuery returns the statement reading key's holder, and its arguments.
func (a *advisoryDriver) holderQuery(counter bool, key, boot string) (string, []any) {
	if counter {
		return fmt.Sprintf(holderSQL, a.s.fenceTable, boot, "f.name_hash = ?", bootSlack), []any{sqlkit.KeyHash(key), lockName(key)}
	}
	row := fmt.Sprintf("f.slot = u.id MOD %d", holderSlots)
	return fmt.Sprintf(holderSQL, a.s.holderTable, boot, row, bootSlack), []any{lockName(key)}
}

// identify writes token's identity in conn's holder row when it changed
// (sqlkit.Identify; sequence and uuid_short fences, own pool).
func (a *advisoryDriver) identify(ctx context.Context, conn pinned, token string) error {
	if st := a.stmts.Load(); conn.sock == nil || a.noIdent.Load() || st.fence == FenceCounter || !st.holders {
		return nil
	}
	return sqlkit.Identify(&conn.sock.ident, token, 0, func(id string) error {
		_, err := conn.exec(ctx, fmt.Sprintf(identifySQL, a.s.holderTable), []any{id, id})
		if errNumber(err) != 0 && !missingTable(err) { // refused (no grant, read-only): write no more
			a.noIdent.Store(true)
			return nil
		}
		return err
	})
}
