package mysql

import (
	"context"
	"database/sql"
)

// A restarted server hands out connection ids from 1 again, so IS_USED_LOCK
// may name a dead holder's id held by another client's new session. A
// probe therefore also reads the server's boot time, and a lock taken
// before it (by the server's own clock) is lost, whatever the id.

// takenSQL is the server's clock in seconds: UNIX_TIMESTAMP() converts no
// time zone (NOW() is ambiguous when the clock goes back).
const takenSQL = "UNIX_TIMESTAMP()"

// bootSQL are the expressions of the server's boot time in seconds, tried
// in order: MariaDB's, MySQL's, none (NULL).
var bootSQL = []string{
	uptimeSQL("information_schema.GLOBAL_STATUS"),
	uptimeSQL("performance_schema.global_status"),
	"NULL",
}

func uptimeSQL(table string) string {
	return "CAST(UNIX_TIMESTAMP() - (SELECT VARIABLE_VALUE FROM " + table + " WHERE VARIABLE_NAME = 'Uptime') AS SIGNED)"
}

// bootSlack is how many seconds after the boot time a lock must have been
// taken to count as taken after it: the boot time may be off by one, so
// that a restart is never missed (a lock taken in the server's first
// seconds is reported lost at the first probe).
const bootSlack = 1

// queryBoot scans q(the boot-time expression)'s row on the pool (withBoot).
func (a *advisoryDriver) queryBoot(ctx context.Context, q func(boot string) string, args []any, dest ...any) error {
	return a.withBoot(func(boot string) error {
		return a.db.QueryRowContext(ctx, q(boot), args...).Scan(dest...)
	})
}

// withBoot runs run with the boot-time expression in use; one the server
// lacks (noBootSource) is left for the next, for good, and run runs again.
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

// holds reports whether h is still held by its own session, from one
// statement's IS_USED_LOCK id and boot time (NULL: the id alone counts):
// not when h was taken before the boot (bootSlack), nor when the boot time
// differs from the one first seen while h was held (a fail-over).
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
