package mysql

import (
	"database/sql/driver"
	"slices"
	"sync/atomic"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers/internal/sqlconn"
)

// The own pool's connections are known by their sockets (sqlconn): their
// statements end by cutting the socket, and the advisory acquire statement
// (sequence and uuid_short fences, session known) and the release run kept
// prepared. On MariaDB 10.11 an acquire+release pair so costs 0.99–1.02 × a
// bare text GET_LOCK + RELEASE_LOCK pair, against 1.17–1.21 × as
// interpolated text. A connection keeps up to three, counted against
// max_prepared_stmt_count.
type (
	sockets = sqlconn.Sockets[connState]
	socket  = sqlconn.Socket[connState]
	pinned  = sqlconn.Pinned[connState]
)

// connState is what the driver keeps with a connection of its own pool.
type connState struct {
	sess  atomic.Pointer[session] // the session, once known (advisory_session.go)
	boot  atomic.Int64            // bootUnread, bootNoCache, or the boot time of a session read in its first seconds
	ident string                  // identity last written, by its holder (advisory_fence.go)
}

// prepareErrors: a statement the server forgot (1243: session reset)
// is prepared again; a prepare refused for good (1461:
// max_prepared_stmt_count; 1295, 1047: no prepared statements) or this
// time runs as text; a missing sequence (created again) or a failed
// connection fails the statement.
var prepareErrors = sqlconn.Errors{
	Forgotten: func(err error) bool { return errNumber(err) == 1243 },
	Refused: func(err error) (text, never bool) {
		n := errNumber(err)
		if n == 0 || missingTable(err) {
			return false, false
		}
		return true, n == 1461 || n == 1295 || n == 1047
	},
}

// ownConnector makes cfg's connections, recording their sockets (nil for
// a network a plain net.Dialer cannot dial: cfg's own connector then).
func ownConnector(cfg *gomysql.Config) (driver.Connector, *sockets, error) {
	if !slices.Contains([]string{"tcp", "tcp4", "tcp6", "unix"}, cfg.Net) {
		c, err := gomysql.NewConnector(cfg)
		return c, nil, err
	}
	socks := sqlconn.New[connState](prepareErrors)
	c, err := socks.Connector(func(dial sqlconn.DialFunc) (driver.Connector, error) {
		cfg.DialFunc = dial
		return gomysql.NewConnector(cfg)
	})
	return c, socks, err
}
