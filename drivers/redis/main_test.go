package redis

import (
	"context"
	"fmt"
	"os"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestMain marks the shared server's epoch first (see knownStore): the
// tests own that server, it is not one that may have forgotten locks.
func TestMain(m *testing.M) {
	if testutil.ChildRole() == "" {
		c := goredis.NewClient(&goredis.Options{Addr: testutil.RedisAddr()})
		err := c.SetNX(context.Background(), epochKey, "0", 0).Err()
		_ = c.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "shared Redis server at %s: %v\n", testutil.RedisAddr(), err)
			os.Exit(1)
		}
	}
	testutil.Main(m, runChild)
}

// standalone returns a driver on the shared Redis server, closed at the end
// of the test.
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
