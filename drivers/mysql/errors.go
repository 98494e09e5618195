package mysql

import (
	"context"
	"errors"
	"slices"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers"
)

// errNumber returns the number of the server error err holds, 0 for none.
// me, which errors.As moves to the heap, is declared past the nil check:
// permanent runs on every acquire and release.
func errNumber(err error) uint16 {
	if err == nil {
		return 0
	}
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// retryable reports deadlocks (1213) and lock wait timeouts (1205).
func retryable(err error) bool { return slices.Contains([]uint16{1213, 1205}, errNumber(err)) }

// interrupted reports a statement the server interrupted (1317: an
// operator's KILL QUERY) while ctx lives: the driver ends statements by
// closing their connection, never so. It was rolled back: it can run again.
func interrupted(ctx context.Context, err error) bool {
	return errNumber(err) == 1317 && ctx.Err() == nil
}

// missingTable reports "table doesn't exist" (1146) or "unknown sequence"
// (MariaDB 4091): the schema is to be created again.
func missingTable(err error) bool { return slices.Contains([]uint16{1146, 4091}, errNumber(err)) }

// lockBusy reports a lock NOWAIT could not have: a lock wait timeout
// (1205, MariaDB) or ER_LOCK_NOWAIT (3572, MySQL).
func lockBusy(err error) bool { return slices.Contains([]uint16{1205, 3572}, errNumber(err)) }

// noBootSource reports that the server has no such status table, or does
// not let this user read it: 1109, 1146, 3167 (MySQL 5.7's disabled
// INFORMATION_SCHEMA.GLOBAL_STATUS), 1044, 1142, 1227 (access denied).
func noBootSource(err error) bool {
	return slices.Contains([]uint16{1044, 1109, 1142, 1146, 1227, 3167}, errNumber(err))
}

// permanentErrors are the server errors retrying cannot cure: refused
// credentials or privileges (1044, 1045, 1142, 1143, 1227, 1370, 1698), an
// unknown database (1049), an authentication method the client cannot
// speak (1251). Deadlocks, "too many connections", a shutdown or a
// read-only fail-over are not among them.
var permanentErrors = []uint16{1044, 1045, 1049, 1142, 1143, 1227, 1251, 1370, 1698}

// permanent marks err drivers.Permanent when it is one of permanentErrors.
func permanent(err error) error {
	if errors.Is(err, drivers.ErrPermanent) || !slices.Contains(permanentErrors, errNumber(err)) {
		return err
	}
	return drivers.Permanent(err)
}
