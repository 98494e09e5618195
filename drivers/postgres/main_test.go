package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m, runChild) }

// shared opens a driver on the machine's PostgreSQL (database test) in mode,
// closed when the test ends.
func shared(t testing.TB, opts Options) Driver {
	t.Helper()
	opts.URL = testutil.PostgresDSN()
	d, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { closeDriver(t, d) })
	return d
}

func closeDriver(t testing.TB, d Driver) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// tableOf and advisoryOf return the driver of each mode, for the tests that
// look inside it.
func tableOf(d Driver) *tableDriver       { return d.(*tableDriver) }
func advisoryOf(d Driver) *advisoryDriver { return d.(*advisoryDriver) }

// baseOf returns what both modes' drivers share.
func baseOf(d Driver) *base {
	if t, ok := d.(*tableDriver); ok {
		return t.base
	}
	return advisoryOf(d).base
}

// connectT opens a connection to the test database, closed when the test
// ends.
func connectT(t testing.TB) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctxT(t), testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}
