package redis

import (
	"testing"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m, runChild) }

// standalone returns a driver on the shared Redis server (marked by
// testutil.RedisAddr as one that forgot no lock), closed at the end of the
// test.
func standalone(t testing.TB, opts Options) *Driver {
	t.Helper()
	if opts.URL == "" && len(opts.Addrs) == 0 {
		opts.Addrs = []string{testutil.RedisAddr()}
	}
	d, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close(t.Context()) })
	return d
}
