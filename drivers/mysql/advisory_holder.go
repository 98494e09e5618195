package mysql

import (
	"context"
	"errors"
	"fmt"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// Who holds an advisory lock another process took. The server tells only
// the holding connection's id (IS_USED_LOCK); the driver keeps, for that
// id, the identity of the holder's token (sqlkit.Identity), the id itself and the
// server's clock when it was written:
//
//   - fence counter: in the key's counter row, written by the acquire
//     statement that takes the lock (no statement or write of its own);
//   - fences sequence and uuid_short: in the row of the connection's slot
//     (its id modulo holderSlots) of the holder table (fenceTable +
//     "_holder"), written before the acquire statement when the
//     connection's identity changes: once per connection for a process
//     whose tokens all name the same holder. Each lock has its own
//     connection, so the row names the holder of the lock it holds. Only
//     on the driver's own pool, whose connections are known by their
//     sockets; with a pool given to NewWithDB these locks' holder is
//     unknown.
//
// Inspect reads IS_USED_LOCK, the server's boot time and the row in one
// statement (holderSQL), and shows the identity only when the row names
// the connection holding the lock and was written after the server's boot
// (bootSlack): ids start again from 1 after a restart. A lock taken
// without writing the row (a driver of an earlier version, a GET_LOCK by
// hand) is shown held by an unknown holder, since the row then names
// another connection (or an earlier life of the server); so is one whose
// row was not written yet, and all locks when the boot time cannot be
// read.

// holderColumns are the counter table's holder columns, added by ALTER
// TABLE to counter tables created by earlier versions.
var holderColumns = []column{
	{"holder", "holder VARBINARY(255) NOT NULL DEFAULT ''"},
	{"conn_id", "conn_id BIGINT UNSIGNED NOT NULL DEFAULT 0"},
	{"taken_at", "taken_at BIGINT NOT NULL DEFAULT 0"},
}

// errNoHolders says that the driver keeps no holders.
var errNoHolders = errors.New("mysql: holders not kept")

// holderSuffix names the holder table after the fence table.
const holderSuffix = "_holder"

// holderSlots bounds the holder table's rows: connections whose ids are
// equal modulo it share a row, and the last one to write it is told.
const holderSlots = 65536

// holderTableDDL is the holder table of the sequence and uuid_short
// fences: the identity of each slot's connection.
var holderTableDDL = `CREATE TABLE IF NOT EXISTS %s (
  slot INT UNSIGNED NOT NULL,
  ` + holderColumns[0].def + `,
  ` + holderColumns[1].def + `,
  ` + holderColumns[2].def + `,
  PRIMARY KEY (slot)
) ENGINE=InnoDB`

// identifySQL writes the connection's identity (the parameter) in its
// slot of the holder table %s.
var identifySQL = `INSERT INTO %s (slot, holder, conn_id, taken_at) VALUES (CONNECTION_ID() MOD ` + fmt.Sprint(holderSlots) +
	`, ?, CONNECTION_ID(), ` + takenSQL + `) ON DUPLICATE KEY UPDATE holder = ?, conn_id = CONNECTION_ID(), taken_at = ` + takenSQL

// holderSQL reads IS_USED_LOCK of the name (the last parameter), the boot
// time (%[2]s) and the identity the row of table %[1]s that %[3]s selects
// keeps, when it names that holder and was written after the boot
// (bootSlack: %[4]d).
const holderSQL = `SELECT u.id, u.boot, (SELECT f.holder FROM %[1]s AS f WHERE %[3]s AND f.conn_id = u.id
 AND f.taken_at > u.boot + %[4]d) FROM (SELECT IS_USED_LOCK(?) AS id, %[2]s AS boot) AS u`

// ensureHolders adds the holder's columns to the counter table, or
// creates the holder table (other fences), and reports whether the driver
// keeps holders: not when the server refuses (no ALTER or CREATE grant,
// a read-only server), so that an upgrade never stops acquisitions; their
// holders are then unknown.
func (a *advisoryDriver) ensureHolders(ctx context.Context, fence string) (bool, error) {
	var err error
	if fence == FenceCounter {
		err = addColumns(ctx, a.db, a.s.fenceTable, holderColumns)
	} else if _, err = a.db.ExecContext(ctx, fmt.Sprintf(holderTableDDL, a.s.holderTable)); err != nil {
		err = fmt.Errorf("mysql: create holder table %s: %w", a.s.holderTable, err)
	}
	var me *gomysql.MySQLError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &me):
		return false, nil
	}
	return false, err
}

// holderQuery returns the statement reading key's holder with the boot
// time expression boot, and its arguments.
func (a *advisoryDriver) holderQuery(counter bool, key, boot string) (string, []any) {
	if counter {
		return fmt.Sprintf(holderSQL, a.s.fenceTable, boot, "f.name_hash = ?", bootSlack), []any{keyHash(key), lockName(key)}
	}
	row := fmt.Sprintf("f.slot = u.id MOD %d", holderSlots)
	return fmt.Sprintf(holderSQL, a.s.holderTable, boot, row, bootSlack), []any{lockName(key)}
}

// identify writes the identity of token in the holder table for conn,
// when it is not the one written last for conn (sequence and uuid_short
// fences, on the driver's own pool).
func (a *advisoryDriver) identify(ctx context.Context, conn pinned, token string) error {
	id := sqlkit.Identity(token, 0)
	if conn.sock == nil || conn.sock.ident == id || a.noIdent.Load() {
		return nil
	}
	if fence, holders, _, _ := a.advisorySQL(false); fence == FenceCounter || !holders {
		return nil
	}
	_, err := conn.exec(ctx, fmt.Sprintf(identifySQL, a.s.holderTable), []any{id, id})
	var me *gomysql.MySQLError
	switch {
	case err == nil:
	case missingTable(err): // created again by the next acquisition
		return err
	case errors.As(err, &me):
		// Refused (no INSERT grant, a read-only server): holders unknown
		// from now on.
		a.noIdent.Store(true)
		return nil
	default:
		return err
	}
	conn.sock.ident = id
	return nil
}
