package redis

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// mustReach fails the test when the server at addrs does not answer PING.
func mustReach(t testing.TB, opts Options) {
	t.Helper()
	d, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer d.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Client().Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis does not answer (scripts/stores.sh starts it): %v", err)
	}
}

func TestConformanceStandalone(t *testing.T) {
	opts := Options{Addrs: []string{testutil.RedisAddr()}}
	mustReach(t, opts)
	drivertest.Run(t, drivertest.Harness{New: func(t testing.TB) drivers.Driver {
		d, err := New(opts)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return d
	}})
}

func TestConformanceCluster(t *testing.T) {
	c := testutil.StartRedisCluster(t)
	opts := Options{Addrs: c.Addrs, Cluster: true}
	drivertest.Run(t, drivertest.Harness{New: func(t testing.TB) drivers.Driver {
		d, err := New(opts)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if !d.cluster || d.Features().Scope != "cluster" {
			t.Fatalf("cluster driver reports scope %q", d.Features().Scope)
		}
		return d
	}})
}
