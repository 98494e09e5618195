package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"slices"
	"sync/atomic"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers/internal/dbconn"
)

// The own pool's connections know their sockets (dbconn.Sockets): their
// statements run without go-sql-driver's context watcher, and a socket
// keeps its connection's session and prepared statements.
type (
	sockets = dbconn.Sockets[sockState]
	socket  = dbconn.Socket[sockState]
	pinned  = dbconn.Pinned[sockState]
)

// sockState is what the driver keeps with each socket (socket.State).
type sockState struct {
	sess  atomic.Pointer[session] // the session, once known (advisory_session.go)
	boot  atomic.Int64            // bootUnread, bootNoCache, or the boot time of a session read in its first seconds
	ident string                  // identity last written, by the connection's holder (advisory_fence.go)
}

// newConnector makes cfg's connections, with the sockets that record them,
// or is cfg's own (sockets nil) for a network a plain net.Dialer cannot
// dial.
func newConnector(cfg *gomysql.Config) (*sockets, driver.Connector, error) {
	if !slices.Contains([]string{"tcp", "tcp4", "tcp6", "unix"}, cfg.Net) {
		c, err := gomysql.NewConnector(cfg)
		return nil, c, err
	}
	s := &sockets{Policy: prepare}
	c, err := s.Connector(func(dial dbconn.Dialer) (driver.Connector, error) {
		cfg.DialFunc = dial
		return gomysql.NewConnector(cfg)
	})
	return s, c, err
}

// On the own pool, the advisory acquire statement (sequence and uuid_short
// fences, session known) and the release run as server-side prepared
// statements kept with each connection's socket (pinned.QueryUint): one
// execute round trip, nothing parsed, no column definitions from MariaDB
// (metadata cache). On MariaDB 10.11 an acquire+release pair so costs
// 0.99–1.02 × a bare text GET_LOCK + RELEASE_LOCK pair, against 1.17–1.21
// × as interpolated text. A connection keeps up to three, counted against
// max_prepared_stmt_count.

// prepare is what the server's errors mean to the kept statements: 1243,
// the session was reset and forgot them (nothing ran); 1461
// (max_prepared_stmt_count), 1295 and 1047 (no prepared statements), to
// run as text for good; a missing table (the sequence is created again)
// or a failed connection fail the statement; others run it as text once.
var prepare = dbconn.Policy{
	Forgotten: func(err error) bool { return errNumber(err) == 1243 },
	Refused: func(err error) dbconn.Refusal {
		switch n := errNumber(err); {
		case missingTable(err) || n == 0:
			return dbconn.Fail
		case n == 1461 || n == 1295 || n == 1047:
			return dbconn.Never
		}
		return dbconn.Text
	},
}

// exec runs q on the pool; with a cancellable ctx on the own pool, on a
// connection taken for it (sockets.Exec).
func (c *core) exec(ctx context.Context, q string, args []any) (sql.Result, error) {
	return c.socks.Exec(ctx, c.db, q, args)
}
