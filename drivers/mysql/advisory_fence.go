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

// Advisory statements: every value a parameter, %[1]s the validated fence
// object, %[2]s the timeout ("? / 1000": a millisecond parameter, or "0").
const (
	// advSequenceSQL takes the lock and then the sequence's next fence in
	// one SELECT: the fence, 0 (busy) or NULL (wait interrupted). A
	// connection whose session is unknown (advisory_session.go) also reads
	// sessionSQL in it.
	advSequenceSQL = `SELECT CASE GET_LOCK(?, %[2]s) WHEN 1 THEN NEXTVAL(%[1]s) WHEN 0 THEN 0 END`
	// advUUIDShortSQL is advSequenceSQL with UUID_SHORT() for NEXTVAL.
	advUUIDShortSQL = `SELECT CASE GET_LOCK(?, %[2]s) WHEN 1 THEN UUID_SHORT() WHEN 0 THEN 0 END`
	// advCounterSQL takes the lock and increments the key's counter row in
	// one statement: LAST_INSERT_ID is the fence, 0 when GET_LOCK failed.
	// The row keeps the holder (advisory_holder.go): identity (2nd and last
	// parameters), connection, clock.
	advCounterSQL = `INSERT INTO %[1]s (name_hash, fence, holder, conn_id, taken_at)
SELECT ?, LAST_INSERT_ID(1), ?, CONNECTION_ID(), ` + takenSQL + ` FROM DUAL WHERE GET_LOCK(?, %[2]s) = 1
ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(fence + 1), holder = ?, conn_id = CONNECTION_ID(), taken_at = ` + takenSQL
	// advCounterNoHolderSQL is advCounterSQL without the holder columns
	// (the server refused to add them).
	advCounterNoHolderSQL = `INSERT INTO %[1]s (name_hash, fence)
SELECT ?, LAST_INSERT_ID(1) FROM DUAL WHERE GET_LOCK(?, %[2]s) = 1
ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(fence + 1)`
)

// fenceSequenceDDL is the fence source on MariaDB. CACHE 1000 spares
// NEXTVAL a write and sync per acquisition; a restart skips the rest of
// the cached range, so fences still only grow.
const fenceSequenceDDL = `CREATE SEQUENCE IF NOT EXISTS %s START WITH 1 INCREMENT BY 1 CACHE 1000 ENGINE=InnoDB`

// fenceCounterDDL is the fence source elsewhere (MySQL 8).
const fenceCounterDDL = `CREATE TABLE IF NOT EXISTS %s (
  name_hash BINARY(32) NOT NULL,
  fence BIGINT UNSIGNED NOT NULL,
  %s,
  %s,
  %s,
  PRIMARY KEY (name_hash)
) ENGINE=InnoDB`

// advStatements are the fence source ensureSchema resolved, whether
// holders are kept (advisory_holder.go), and the acquire statement
// [without, with a timeout][alone, reading the session].
type advStatements struct {
	fence   string
	holders bool
	acquire [2][2]string
}

// ensureSchema resolves the fence source and creates its table or sequence.
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
	ddl := fmt.Sprintf(fenceCounterDDL, a.s.fenceTable, holderColumns[0].def, holderColumns[1].def, holderColumns[2].def)
	switch fence {
	case FenceSequence:
		ddl = fmt.Sprintf(fenceSequenceDDL, a.s.fenceTable)
	case FenceUUIDShort:
		ddl = ""
	}
	if ddl != "" {
		if _, err := a.db.ExecContext(ctx, ddl); err != nil {
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
