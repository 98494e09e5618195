package mysql

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestPermanentErrors: refused credentials and privileges and an unknown
// database are permanent; deadlocks, timeouts, overload, shutdown and
// read-only (fail-over) errors are not.
func TestPermanentErrors(t *testing.T) {
	for _, tc := range []struct {
		number uint16
		want   bool
	}{
		{1044, true},  // database access denied
		{1045, true},  // access denied (user, password)
		{1049, true},  // unknown database
		{1142, true},  // table access denied
		{1227, true},  // specific privilege required
		{1698, true},  // access denied, no password
		{1205, false}, // lock wait timeout
		{1213, false}, // deadlock
		{1040, false}, // too many connections
		{1053, false}, // server shutdown in progress
		{1290, false}, // --read-only (a replica during fail-over)
		{1317, false}, // query interrupted
	} {
		err := fmt.Errorf("mysql: acquire: %w", &gomysql.MySQLError{Number: tc.number, Message: "m"})
		got := permanent(err)
		if errors.Is(got, drivers.ErrPermanent) != tc.want || !errors.Is(got, err) || got.Error() != err.Error() {
			t.Errorf("permanent(error %d) = %v (permanent %v); want %v", tc.number, got, errors.Is(got, drivers.ErrPermanent), tc.want)
		}
	}
	for _, err := range []error{nil, context.DeadlineExceeded, gomysql.ErrInvalidConn} {
		if got := permanent(err); errors.Is(got, drivers.ErrPermanent) {
			t.Errorf("permanent(%v) is permanent", err)
		}
	}
}

// TestAcquirePermanent: an Acquire waiting 5 s fails within a second with
// a wrong password (1045), a user without access to the database (1044),
// an unknown database (1049) and, in table mode, a user that may not
// create the table (1142).
func TestAcquirePermanent(t *testing.T) {
	root := openDB(t, testutil.MySQLDSN())
	cfg, err := gomysql.ParseDSN(testutil.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	sfx := strings.ToLower(rand.Text()[:10])
	none, reader := "mutexfx_none_"+sfx, "mutexfx_read_"+sfx
	ctx := t.Context()
	for _, q := range []string{
		"CREATE USER '" + none + "'@'%' IDENTIFIED BY 'S3cr3tPW'",
		"CREATE USER '" + reader + "'@'%' IDENTIFIED BY 'S3cr3tPW'",
		"GRANT SELECT ON `" + cfg.DBName + "`.* TO '" + reader + "'@'%'",
	} {
		if _, err := root.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := root.ExecContext(ctx, "DROP USER IF EXISTS '"+none+"'@'%', '"+reader+"'@'%'"); err != nil {
			t.Errorf("drop users: %v", err)
		}
	})
	dsn := func(user, password, db string) string {
		c := cfg.Clone()
		c.User, c.Passwd, c.DBName = user, password, db
		return c.FormatDSN()
	}
	for _, tc := range []struct {
		name, dsn string
		modes     []string
		number    uint16
	}{
		{"wrongPassword", dsn(none, "Wr0ngPW", cfg.DBName), []string{ModeAdvisory, ModeTable}, 1045},
		{"noDatabaseAccess", dsn(none, "S3cr3tPW", cfg.DBName), []string{ModeAdvisory, ModeTable}, 1044},
		{"unknownDatabase", dsn(cfg.User, cfg.Passwd, cfg.DBName+"_missing_"+sfx), []string{ModeAdvisory, ModeTable}, 1049},
		{"noCreate", dsn(reader, "S3cr3tPW", cfg.DBName), []string{ModeTable}, 1142},
	} {
		for _, mode := range tc.modes {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				opts := Options{DSN: tc.dsn, Mode: mode}
				if mode == ModeTable {
					opts.Table = "mutexfx_perm_" + sfx
				}
				err := drivertest.AcquireFailsAtOnce(t, openDriver(t, opts))
				var me *gomysql.MySQLError
				if !errors.As(err, &me) || me.Number != tc.number || strings.Contains(err.Error(), "S3cr3tPW") || strings.Contains(err.Error(), "Wr0ngPW") {
					t.Fatalf("Acquire = %v; want error %d, without the password", err, tc.number)
				}
			})
		}
	}
}
