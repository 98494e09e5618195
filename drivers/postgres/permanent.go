package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mutexfx/mutexfx/drivers"
)

// permanentCodes are the SQLSTATEs that retrying cannot cure: the server
// refused the credentials or the role, the role lacks a privilege (CONNECT
// on the database, USAGE or CREATE on the schema, rights on the table), or
// the database does not exist. Fail-overs, restarts, a full connection
// table and timeouts (57P01, 57P03, 53300, 08xxx, 40001, 55P03) are not
// among them.
var permanentCodes = map[string]bool{
	"28P01": true, // invalid_password
	"28000": true, // invalid_authorization_specification (pg_hba.conf rejects)
	"42501": true, // insufficient_privilege
	"3D000": true, // invalid_catalog_name: no such database
}

// permanent returns err marked drivers.Permanent when the server answered
// with one of permanentCodes, else err unchanged.
func permanent(err error) error {
	var pe *pgconn.PgError
	if err == nil || errors.Is(err, drivers.ErrPermanent) || !errors.As(err, &pe) || !permanentCodes[pe.Code] {
		return err
	}
	return drivers.Permanent(err)
}
