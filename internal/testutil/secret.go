package testutil

import (
	"fmt"
	"net"
	"net/url"

	mysqldrv "github.com/go-sql-driver/mysql"
)

// CredentialDrivers returns, by driver type (postgres, redis, mysql), a
// driver block (a YAML flow map) on the tests' stores that carries
// password: PostgreSQL (trust auth) accepts it and ignores it; Redis and
// MySQL have no such user or password and refuse every call. For tests
// that a password reaches no output.
func CredentialDrivers(password string) (map[string]string, error) {
	pg, err := url.Parse(PostgresDSN())
	if err != nil {
		return nil, err
	}
	pg.User = url.UserPassword(pg.User.Username(), password)
	my, err := mysqldrv.ParseDSN(MySQLDSN())
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(my.Addr)
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"postgres": fmt.Sprintf("{type: postgres, url: %q, mode: table}", pg.String()),
		"redis":    fmt.Sprintf("{type: redis, addrs: [%q], username: nobody, password: %q}", RedisAddr(), password),
		"mysql": fmt.Sprintf("{type: mysql, host: %q, port: %s, database: %q, username: nobody, password: %q}",
			host, port, my.DBName, password),
	}, nil
}
