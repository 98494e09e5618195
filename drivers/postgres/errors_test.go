package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestPermanentErrors: refused credentials, a role refused login or a
// privilege, and an unknown database are permanent; fail-over, overload,
// serialization and network errors are not.
func TestPermanentErrors(t *testing.T) {
	for _, tc := range []struct {
		code string
		want bool
	}{
		{"28P01", true},  // invalid_password
		{"28000", true},  // invalid_authorization_specification
		{"42501", true},  // insufficient_privilege
		{"3D000", true},  // invalid_catalog_name
		{"57P01", false}, // admin_shutdown (fail-over, restart)
		{"57P03", false}, // cannot_connect_now (starting up)
		{"53300", false}, // too_many_connections
		{"08006", false}, // connection_failure
		{"40001", false}, // serialization_failure
		{"25006", false}, // read_only_sql_transaction (a standby)
	} {
		err := fmt.Errorf("postgres: acquire: %w", &pgconn.PgError{Code: tc.code, Message: "m"})
		got := permanent(err)
		if errors.Is(got, drivers.ErrPermanent) != tc.want || !errors.Is(got, err) || got.Error() != err.Error() {
			t.Errorf("permanent(SQLSTATE %s) = %v (permanent %v); want %v", tc.code, got, errors.Is(got, drivers.ErrPermanent), tc.want)
		}
	}
	for _, err := range []error{nil, context.DeadlineExceeded, errors.New("dial tcp 127.0.0.1:1: connect: connection refused")} {
		if got := permanent(err); errors.Is(got, drivers.ErrPermanent) {
			t.Errorf("permanent(%v) is permanent", err)
		}
	}
}

// TestAcquirePermanent: in both modes, an Acquire waiting 5 s fails within
// a second when the role may not connect to the database (42501), may
// not log in (28000), or the database does not exist (3D000). The
// server's pg_hba trusts 127.0.0.1, so a wrong password is not refused
// there: a role without CONNECT stands for refused credentials.
func TestAcquirePermanent(t *testing.T) {
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	sfx := strings.ToLower(rand.Text()[:10])
	db, noConnect, noLogin := "mutexfx_noconn_"+sfx, "mutexfx_noconn_"+sfx, "mutexfx_nologin_"+sfx
	for _, q := range []string{
		"CREATE ROLE " + noConnect + " LOGIN PASSWORD 'S3cr3tPW'",
		"CREATE ROLE " + noLogin + " NOLOGIN",
		"CREATE DATABASE " + db,
		"REVOKE CONNECT ON DATABASE " + db + " FROM PUBLIC",
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, q := range []string{"DROP DATABASE IF EXISTS " + db + " WITH (FORCE)", "DROP ROLE IF EXISTS " + noConnect, "DROP ROLE IF EXISTS " + noLogin} {
			if _, err := admin.Exec(ctx, q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
		_ = admin.Close(ctx)
	})
	base, err := url.Parse(testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	dsn := func(user *url.Userinfo, db string) string {
		u := *base
		u.User, u.Path = user, "/"+db
		return u.String()
	}
	for _, tc := range []struct{ name, dsn, code string }{
		{"noConnect", dsn(url.UserPassword(noConnect, "S3cr3tPW"), db), "42501"},
		{"noLogin", dsn(url.User(noLogin), db), "28000"},
		{"noDatabase", dsn(base.User, db+"_missing"), "3D000"},
	} {
		for _, mode := range []string{ModeAdvisory, ModeTable} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				err := drivertest.AcquireFailsAtOnce(t, on(t, tc.dsn, Options{Mode: mode}))
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != tc.code || strings.Contains(err.Error(), "S3cr3tPW") {
					t.Fatalf("Acquire = %v; want SQLSTATE %s, without the password", err, tc.code)
				}
			})
		}
	}
}
