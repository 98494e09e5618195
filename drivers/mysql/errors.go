package mysql

import (
	"errors"
	"slices"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers"
)

// errNumber returns the number of the server error err holds, 0 for none.
// The nil check spares errors.As a heap allocation on every call.
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

// isErr reports whether err is a server error with one of numbers.
func isErr(err error, numbers ...uint16) bool { return slices.Contains(numbers, errNumber(err)) }

// retryable reports deadlocks (1213) and lock wait timeouts (1205).
func retryable(err error) bool { return isErr(err, 1213, 1205) }

// missingTable reports "table doesn't exist" (1146) or "unknown sequence"
// (MariaDB 4091): the schema is to be created again.
func missingTable(err error) bool { return isErr(err, 1146, 4091) }

// noBootSource reports that the server has no such status table, or does
// not let this user read it: 1109, 1146, 3167 (MySQL 5.7's disabled
// INFORMATION_SCHEMA.GLOBAL_STATUS), 1044, 1142, 1227 (access denied).
func noBootSource(err error) bool { return isErr(err, 1044, 1109, 1142, 1146, 1227, 3167) }

// permanent marks err drivers.Permanent when retrying cannot cure it:
// refused credentials or privileges (1044, 1045, 1142, 1143, 1227, 1370,
// 1698), an unknown database (1049), an authentication method the client
// cannot speak (1251). Deadlocks, "too many connections", a shutdown or a
// read-only fail-over are not among them.
func permanent(err error) error {
	if errors.Is(err, drivers.ErrPermanent) || !isErr(err, 1044, 1045, 1049, 1142, 1143, 1227, 1251, 1370, 1698) {
		return err
	}
	return drivers.Permanent(err)
}
