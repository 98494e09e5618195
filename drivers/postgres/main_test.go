package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m, runChild) }

// shared opens a driver on the machine's PostgreSQL (database test) in mode,
// closed when the test ends.
func shared(t testing.TB, opts Options) *Driver {
	t.Helper()
	opts.URL = testutil.PostgresDSN()
	d, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { closeDriver(t, d) })
	return d
}

func closeDriver(t testing.TB, d *Driver) {
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
