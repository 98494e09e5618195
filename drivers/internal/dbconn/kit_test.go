package dbconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// state is a test driver's per-socket state.
type state struct{ uses int }

// mysqlPolicy is the MySQL driver's reading of its server's errors, as
// far as these tests need it.
var mysqlPolicy = Policy{
	Forgotten: func(err error) bool { return errNum(err) == 1243 },
	Refused: func(err error) Refusal {
		switch errNum(err) {
		case 0:
			return Fail
		case 1461:
			return Never
		}
		return Text
	},
}

func errNum(err error) uint16 {
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// openPool opens a pool on the test MariaDB whose sockets socks records,
// closed at the test's end, which also ends ctx.
func openPool(t *testing.T, p Policy) (ctx context.Context, db *sql.DB, socks *Sockets[state]) {
	t.Helper()
	cfg, err := gomysql.ParseDSN(testutil.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	socks = &Sockets[state]{Policy: p}
	c, err := socks.Connector(func(dial Dialer) (driver.Connector, error) {
		cfg.DialFunc = dial
		cfg.InterpolateParams = true // as the mysql driver does
		return gomysql.NewConnector(cfg)
	})
	if err != nil {
		t.Fatal(err)
	}
	db = sql.OpenDB(c)
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx, db, socks
}

// admin opens a plain pool on the test MariaDB.
func admin(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", testutil.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// connID returns p's session id.
func connID(ctx context.Context, t *testing.T, p Pinned[state]) int64 {
	t.Helper()
	var id int64
	if err := p.QueryRow(ctx, "SELECT CONNECTION_ID()", nil, &id); err != nil {
		t.Fatal(err)
	}
	return id
}
