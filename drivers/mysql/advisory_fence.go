package mysql

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// lockName is the GET_LOCK name of key: "mutexfx:" and 48 hex digits of
// sqlkit.KeyHash, 56 characters (the limit is 64).
func lockName(key string) string { return "mutexfx:" + hex.EncodeToString(sqlkit.KeyHash(key)[:24]) }

// Advisory statements: values are parameters; %[1]s the fence object,
// %[2]s the timeout ("? / 1000": a ms parameter, or "0").
const (
	// advSequenceSQL takes the lock and then the sequence's next fence in
	// one SELECT: the fence, 0 (busy) or NULL (wait interrupted). A
	// connection whose session is unknown also reads sessionSQL in it.
	advSequenceSQL = `SELECT CASE GET_LOCK(?, %[2]s) WHEN 1 THEN NEXTVAL(%[1]s) WHEN 0 THEN 0 END`
	// advUUIDShortSQL is advSequenceSQL with UUID_SHORT() for NEXTVAL.
	advUUIDShortSQL = `SELECT CASE GET_LOCK(?, %[2]s) WHEN 1 THEN UUID_SHORT() WHEN 0 THEN 0 END`
	// advCounterSQL takes the lock and moves the key's counter row to its
	// next fence (nextFence: table mode's, the clock of the statement's
	// start at least, then one more under the row lock taken after the
	// wait): LAST_INSERT_ID is the fence, 0 when GET_LOCK failed. The row
	// keeps the holder's identity (2nd and last parameters), connection,
	// clock.
	advCounterSQL = `INSERT INTO %[1]s (name_hash, fence, holder, conn_id, taken_at)
SELECT ?, LAST_INSERT_ID(` + fenceClock + `), ?, CONNECTION_ID(), ` + takenSQL + ` FROM DUAL WHERE GET_LOCK(?, %[2]s) = 1
ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(` + nextFence + `), holder = ?, conn_id = CONNECTION_ID(), taken_at = ` + takenSQL
	// advCounterNoHolderSQL is advCounterSQL without the holder columns
	// (refused by the server).
	advCounterNoHolderSQL = `INSERT INTO %[1]s (name_hash, fence)
SELECT ?, LAST_INSERT_ID(` + fenceClock + `) FROM DUAL WHERE GET_LOCK(?, %[2]s) = 1
ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(` + nextFence + `)`
)

// fenceSequenceDDL is the fence source on MariaDB. CACHE 1000 spares
// NEXTVAL a write and sync per acquisition; a restart skips the rest of
// the cached range, so fences still only grow.
const fenceSequenceDDL = `CREATE SEQUENCE IF NOT EXISTS %s START WITH 1 INCREMENT BY 1 CACHE 1000 ENGINE=InnoDB`

// fenceCounterDDL is the fence source elsewhere (MySQL 8).
var fenceCounterDDL = `CREATE TABLE IF NOT EXISTS %s (
  name_hash BINARY(32) NOT NULL,
  fence BIGINT UNSIGNED NOT NULL,
  ` + holderDefs + `,
  PRIMARY KEY (name_hash)
) ENGINE=InnoDB`

// The server tells only the holding connection's id (IS_USED_LOCK), so the
// driver writes the holder's identity (sqlkit.Identity) with that id and
// the server's clock: in the key's counter row by the acquire statement
// (counter fence), or on the own pool in the holder table row of the
// connection's slot when its identity changed (sequence and uuid_short).
// Inspect shows it only if the row names the holding connection and was
// written after the boot (ids restart from 1).

// holderColumns are the counter table's holder columns (holderDefs: in a
// CREATE TABLE).
var holderColumns = []column{
	{"holder", "holder VARBINARY(255) NOT NULL DEFAULT ''"},
	{"conn_id", "conn_id BIGINT UNSIGNED NOT NULL DEFAULT 0"},
	{"taken_at", "taken_at BIGINT NOT NULL DEFAULT 0"},
}
var holderDefs = holderColumns[0].def + ",\n  " + holderColumns[1].def + ",\n  " + holderColumns[2].def

// holderSuffix names the holder table after the fence table.
const holderSuffix = "_holder"

// holderSlots bounds the holder table's rows: ids equal modulo it share a
// row (the last writer shows).
const holderSlots = 65536

// holderTableDDL is the holder table of the sequence and uuid_short fences.
var holderTableDDL = `CREATE TABLE IF NOT EXISTS %s (
  slot INT UNSIGNED NOT NULL,
  ` + holderDefs + `,
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

// advStatements are the fence source ensureSchema resolved, whether
// holders are kept, and acquire[without, with timeout][alone, with session].
type advStatements struct {
	fence   string
	holders bool
	acquire [2][2]string
}

// ensureSchema resolves the fence source and creates its table or
// sequence, and the holders' columns or table.
func (a *advisoryDriver) ensureSchema(ctx context.Context) error {
	fence := a.s.fence
	if fence == FenceAuto {
		var version string
		if err := a.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
			return fmt.Errorf("mysql: server version: %w", err)
		}
		fence = FenceCounter
		if strings.Contains(strings.ToLower(version), "mariadb") {
			fence = FenceSequence
		}
	}
	ddl := map[string]string{FenceSequence: fenceSequenceDDL, FenceCounter: fenceCounterDDL}[fence]
	if ddl != "" {
		if _, err := a.db.ExecContext(ctx, fmt.Sprintf(ddl, a.s.fenceTable)); err != nil {
			return fmt.Errorf("mysql: create fence %s %s: %w", fence, a.s.fenceTable, err)
		}
	}
	holders, err := a.ensureHolders(ctx, fence)
	if err != nil {
		return err
	}
	tmpl := map[string]string{FenceSequence: advSequenceSQL, FenceUUIDShort: advUUIDShortSQL, FenceCounter: advCounterSQL}[fence]
	if fence == FenceCounter && !holders {
		tmpl = advCounterNoHolderSQL
	}
	st := &advStatements{fence: fence, holders: holders}
	for i, timeout := range []string{"0", "? / 1000"} {
		q := fmt.Sprintf(tmpl, a.s.fenceTable, timeout)
		st.acquire[i] = [2]string{q, ""}
		if fence != FenceCounter { // a SELECT: the session's columns follow
			st.acquire[i][1] = q + ", " + sessionSQL
		}
	}
	a.stmts.Store(st)
	return nil
}

// ensureHolders adds the holder columns to the counter table or creates
// the holder table: false when the server refuses (no grant, read-only),
// which never stops acquisitions.
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
	if st := a.stmts.Load(); conn.Sock == nil || a.noIdent.Load() || st.fence == FenceCounter || !st.holders {
		return nil
	}
	return sqlkit.Identify(&conn.Sock.State.ident, token, 0, func(id string) error {
		_, err := conn.Exec(ctx, fmt.Sprintf(identifySQL, a.s.holderTable), []any{id, id})
		if errNumber(err) != 0 && !missingTable(err) { // refused (no grant, read-only): write no more
			a.noIdent.Store(true)
			return nil
		}
		return err
	})
}
