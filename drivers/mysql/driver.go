// Package mysql is the MySQL / MariaDB driver of mutexfx. In advisory mode
// (the default) a lock is a GET_LOCK held by a connection the driver pins
// for it: it ends with that connection and is per server. In table mode a
// lock is a row whose expiry the database's clock computes; it works on
// clusters. See Options and docs/mysql.md.
package mysql

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

// ErrClosed is returned by calls on a closed Driver: it is drivers.ErrClosed.
var ErrClosed = drivers.ErrClosed

// Driver is a MySQL / MariaDB driver of the mechanism Options.Mode names;
// table mode's also implements drivers.Handoverer and drivers.Lister.
type Driver interface {
	drivers.SQLDriver
}

// Factory returns the "mysql" driver factory. The driver block's keys are
// the koanf tags of Options; with driver.client naming a *sql.DB of the fx
// graph, the driver uses that pool (see NewWithDB) and never closes it.
func Factory() drivers.Factory {
	return kit.NewFactory("a *sql.DB", New, NewWithDB).Of("mysql")
}

// New validates opts and returns a driver with its own pool, connecting
// nothing yet; Close closes the pool. An invalid option is a
// *drivers.OptionsError naming its key.
func New(opts Options) (Driver, error) {
	s, err := opts.validate()
	if err != nil {
		return nil, err
	}
	cfg, err := opts.mysqlConfig(s)
	if err != nil {
		return nil, err
	}
	socks, connector, err := newConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: %s", scrubPassword(err.Error(), "invalid connection settings", cfg.Passwd))
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(s.maxOpen)
	db.SetMaxIdleConns(s.maxIdle)
	db.SetConnMaxIdleTime(5 * time.Minute)
	return newDriver(db, true, socks, s), nil
}

// NewWithDB returns a driver using the application's pool db, which it
// never closes (Close only lets go of the connections it pinned).
// Connection options must be empty. db must run in autocommit mode (the
// default) and should have interpolateParams=true (one round trip per
// statement, not three) and no clientFoundRows.
func NewWithDB(db *sql.DB, opts Options) (Driver, error) {
	if db == nil {
		return nil, drivers.OptionErrorf("", "nil *sql.DB")
	}
	s, err := opts.validate()
	if err != nil {
		return nil, err
	}
	if key := kit.SetKey(opts, "dsn", "host", "database", "username", "password", "tls"); key != "" {
		return nil, drivers.OptionErrorf(key, "not allowed with an existing *sql.DB")
	}
	if kit.SetKey(opts, "port", "maxOpenConns", "maxIdleConns", "dialTimeout", "preparedStatements") != "" {
		return nil, drivers.OptionErrorf("", "connection options are not allowed with an existing *sql.DB")
	}
	return newDriver(db, false, nil, s), nil
}

// newDriver builds the mechanism s.mode names.
func newDriver(db *sql.DB, own bool, socks *sockets, s settings) Driver {
	if s.mode == ModeTable {
		return newTable(db, own, socks, s)
	}
	return newAdvisory(db, own, socks, s)
}

// checkToken rejects tokens the token column cannot hold.
func checkToken(token string) error {
	if token == "" || len(token) > 255 {
		return fmt.Errorf("mysql: token of %d bytes: must be 1 to 255", len(token))
	}
	return nil
}
