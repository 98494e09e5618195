package testutil

import (
	"os"
	"sync"
)

var markShared sync.Once

// RedisAddr is the shared Redis server the tests use: MUTEXFX_REDIS_ADDR or
// 127.0.0.1:6379. Tests that kill or restart a server start their own. The
// first call marks the server as one that forgot no lock (see
// MarkRedisKnown), so that a server just started for the tests grants at
// once.
func RedisAddr() string {
	addr := env("MUTEXFX_REDIS_ADDR", "127.0.0.1:6379")
	markShared.Do(func() { _ = MarkRedisKnown(addr) }) // an unreachable server fails the tests that use it
	return addr
}

// PostgresDSN is the shared PostgreSQL database the tests use:
// MUTEXFX_POSTGRES_DSN or the machine's trust-auth database "test".
func PostgresDSN() string {
	return env("MUTEXFX_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
}

// MySQLDSN is the shared MariaDB/MySQL database the tests use (a
// go-sql-driver DSN): MUTEXFX_MYSQL_DSN or root without password on database
// "test".
func MySQLDSN() string { return env("MUTEXFX_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test") }

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
