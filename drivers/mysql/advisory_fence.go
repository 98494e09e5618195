package mysql

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// lockName is the GET_LOCK name of key: "mutexfx:" and the first 48 hex
// digits (192 bits) of its SHA-256, 56 characters, under the 64-character
// limit, distinct for keys differing only in case.
func lockName(key string) string {
	h := sha256.Sum256([]byte(key))
	return "mutexfx:" + hex.EncodeToString(h[:24])
}

// Advisory statements; every value is a parameter, the fence object name
// is validated configuration.
const (
	// advSequenceSQL takes the lock and, only when it got it, the next fence
	// from the sequence, in one SELECT. 1 = acquired, 0 = busy, NULL =
	// GET_LOCK's wait was interrupted (statement timeout, KILL QUERY): not
	// acquired either.
	// %[2]s is the timeout: "? / 1000" (a millisecond parameter) or "0".
	// A connection whose session is not known yet (advisory_session.go) also
	// reads sessionSQL in it.
	advSequenceSQL = `SELECT CASE GET_LOCK(?, %[2]s) WHEN 1 THEN NEXTVAL(%[1]s) WHEN 0 THEN 0 END`
	// advUUIDShortSQL is advSequenceSQL with UUID_SHORT() for NEXTVAL.
	advUUIDShortSQL = `SELECT CASE GET_LOCK(?, %[2]s) WHEN 1 THEN UUID_SHORT() WHEN 0 THEN 0 END`
	// advCounterSQL takes the lock and increments the key's counter row in
	// one statement; LAST_INSERT_ID is the fence, 0 when GET_LOCK failed.
	// The row also keeps who took it (advisory_holder.go): the holder's
	// identity (the second and last parameters), the connection and the
	// server's clock.
	advCounterSQL = `INSERT INTO %[1]s (name_hash, fence, holder, conn_id, taken_at)
SELECT ?, LAST_INSERT_ID(1), ?, CONNECTION_ID(), ` + takenSQL + ` FROM DUAL WHERE GET_LOCK(?, %[2]s) = 1
ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(fence + 1), holder = ?, conn_id = CONNECTION_ID(), taken_at = ` + takenSQL
	// advCounterNoHolderSQL is advCounterSQL for a counter table without
	// the holder's columns (the server refused to add them); its
	// parameters are the hash and GET_LOCK's.
	advCounterNoHolderSQL = `INSERT INTO %[1]s (name_hash, fence)
SELECT ?, LAST_INSERT_ID(1) FROM DUAL WHERE GET_LOCK(?, %[2]s) = 1
ON DUPLICATE KEY UPDATE fence = LAST_INSERT_ID(fence + 1)`
)

// fenceSequenceDDL is the advisory mode's fence source on MariaDB. CACHE
// 1000 keeps NEXTVAL from writing (and syncing) on every acquisition; a
// restart skips the rest of the cached range, so fences still only grow.
const fenceSequenceDDL = `CREATE SEQUENCE IF NOT EXISTS %s START WITH 1 INCREMENT BY 1 CACHE 1000 ENGINE=InnoDB`

// fenceCounterDDL is the advisory mode's fence source elsewhere (MySQL 8),
// with the holder's columns (holderColumns).
const fenceCounterDDL = `CREATE TABLE IF NOT EXISTS %s (
  name_hash BINARY(32) NOT NULL,
  fence BIGINT UNSIGNED NOT NULL,
  %s,
  %s,
  %s,
  PRIMARY KEY (name_hash)
) ENGINE=InnoDB`

// ensureSchema resolves the fence source and creates it if it is a
// table or a sequence (run by core.schema).
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
	for i, timeout := range []string{"0", "? / 1000"} {
		q := fmt.Sprintf(tmpl, a.s.fenceTable, timeout)
		a.advSQL[i] = [2]string{q, ""}
		if fence != FenceCounter { // a SELECT: the session's columns follow
			a.advSQL[i][1] = q + ", " + sessionSQL
		}
	}
	a.holders = holders
	a.fence = fence
	return nil
}

// advisorySQL returns the resolved advisory fence source, whether holders
// are kept (advisory_holder.go), and its acquire statement, with a timeout
// parameter or none (0), and the same statement also reading the
// connection's session (sequence and uuid_short fences).
func (a *advisoryDriver) advisorySQL(wait bool) (fence string, holders bool, query, withSession string) {
	a.ddl.Lock()
	defer a.ddl.Unlock()
	i := 0
	if wait {
		i = 1
	}
	return a.fence, a.holders, a.advSQL[i][0], a.advSQL[i][1]
}
