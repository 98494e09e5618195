package mysql

import (
	"errors"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers"
)

// permanentErrors are the server error numbers that retrying cannot cure:
// refused credentials, a missing privilege, an unknown database, an
// authentication method the client cannot speak. Deadlocks, lock wait
// timeouts, "too many connections", a server shutting down or read-only
// during a fail-over are not among them.
var permanentErrors = map[uint16]bool{
	1044: true, // ER_DBACCESS_DENIED_ERROR
	1045: true, // ER_ACCESS_DENIED_ERROR (wrong user or password)
	1049: true, // ER_BAD_DB_ERROR: unknown database
	1142: true, // ER_TABLEACCESS_DENIED_ERROR
	1143: true, // ER_COLUMNACCESS_DENIED_ERROR
	1227: true, // ER_SPECIFIC_ACCESS_DENIED_ERROR
	1251: true, // ER_NOT_SUPPORTED_AUTH_MODE
	1370: true, // ER_PROCACCESS_DENIED_ERROR
	1698: true, // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
}

// permanent returns err marked drivers.Permanent when the server answered
// with one of permanentErrors, else err unchanged. A nil err costs
// nothing: me, which errors.As moves to the heap, is declared past it.
func permanent(err error) error {
	if err == nil || errors.Is(err, drivers.ErrPermanent) {
		return err
	}
	var me *gomysql.MySQLError
	if !errors.As(err, &me) || !permanentErrors[me.Number] {
		return err
	}
	return drivers.Permanent(err)
}
