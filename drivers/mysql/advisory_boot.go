package mysql

import (
	"context"
	"database/sql"
	"errors"
	"slices"

	gomysql "github.com/go-sql-driver/mysql"
)

// A restarted server hands out connection ids from 1 again: another
// client's new session may have a dead holder's id and hold the same lock
// name, and IS_USED_LOCK would then name the holder's id. So a probe also
// reads the server's boot time, and a lock taken before it (by the server's
// own clock) is lost, whatever the id.
//
// The lock's session — its connection's id and a reading of the server's
// clock (takenSQL) during it — is read in the acquire statement, or once
// per connection of the driver's own pool with the boot time (advisory_session.go).
// The boot time costs a read of the server's status (about 0.3 ms): once
// per probe statement, and once per new connection of the driver's own
// pool, never per acquisition.

// takenSQL is the server's clock, in seconds, when the statement started.
// UNIX_TIMESTAMP() without an argument converts no time zone (that of
// NOW() would go through the session's local time, ambiguous in the hour a
// clock goes back) and costs nothing measurable; seconds are as fine as
// the boot time can tell.
const takenSQL = "UNIX_TIMESTAMP()"

// bootSQL are the expressions of the server's boot time, in seconds (its
// clock now minus its uptime), tried in this order: MariaDB's
// information_schema.GLOBAL_STATUS, then performance_schema.global_status
// (MySQL 5.7+, which removed the former in 8.0), then none (NULL).
var bootSQL = []string{
	uptimeSQL("information_schema.GLOBAL_STATUS"),
	uptimeSQL("performance_schema.global_status"),
	"NULL",
}

func uptimeSQL(table string) string {
	return "CAST(UNIX_TIMESTAMP() - (SELECT VARIABLE_VALUE FROM " + table + " WHERE VARIABLE_NAME = 'Uptime') AS SIGNED)"
}

// bootSlack is how many seconds after the boot time's second a lock must
// have been taken to count as taken after the boot. Uptime has a resolution
// of a second, and the boot time so found may be off by one: with this
// slack a restart is never missed, and a lock taken in the first one to two
// seconds of the server's life is reported lost at the first probe.
const bootSlack = 1

// noBootSource reports whether err says that the server has no such status
// table or does not let this user read it: unknown table (1109), no such
// table (1146), INFORMATION_SCHEMA.GLOBAL_STATUS disabled (3167, MySQL 5.7),
// access denied (1044, 1142, 1227).
func noBootSource(err error) bool {
	var me *gomysql.MySQLError
	return errors.As(err, &me) && slices.Contains([]uint16{1044, 1109, 1142, 1146, 1227, 3167}, me.Number)
}

// queryBoot runs on the pool the statement q makes of the boot-time
// expression in use and scans its row into dest (see withBoot).
func (a *advisoryDriver) queryBoot(ctx context.Context, q func(boot string) string, args []any, dest ...any) error {
	return a.withBoot(func(boot string) error {
		return a.db.QueryRowContext(ctx, q(boot), args...).Scan(dest...)
	})
}

// withBoot runs run with the boot-time expression in use. A source the
// server does not have (or not for this user) is left for the next, for
// good, and run runs again.
func (a *advisoryDriver) withBoot(run func(boot string) error) error {
	for {
		src := a.bootSrc.Load()
		err := run(a.bootSQL[src])
		if int(src) < len(a.bootSQL)-1 && noBootSource(err) {
			a.bootSrc.CompareAndSwap(src, src+1)
			continue
		}
		return err
	}
}

// holds reports whether h is still held by its own session, from what one
// statement read: id, the session holding h's name (IS_USED_LOCK), and
// boot, the server's boot time (NULL: unknown, then only the id counts).
//
// Not held when another session holds the name; when h was taken before
// the boot (bootSlack: or in the boot's first seconds), on an earlier life
// of the server; or when the boot time differs from the one first seen
// while h was held, the answer of another server (a failover).
func (h *heldLock) holds(id, boot sql.NullInt64) bool {
	if !id.Valid || id.Int64 != h.connID {
		return false
	}
	if !boot.Valid {
		return true
	}
	b := boot.Int64
	if h.takenAt <= b+bootSlack {
		return false
	}
	if h.boot.CompareAndSwap(0, b) {
		return true
	}
	seen := h.boot.Load()
	return b >= seen-bootSlack && b <= seen+bootSlack
}
