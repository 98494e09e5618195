package redis

import (
	"context"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// knownStore writes the epoch markers of a store the test knows to have
// granted no lock yet (a throwaway server it just started), as an operator
// may: its first acquisitions then wait for nothing (the brand-new-store
// wait has its own tests in epoch_test.go). Cluster: every slot's marker.
func knownStore(t testing.TB, c goredis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	if cc, ok := c.(*goredis.ClusterClient); ok {
		pipe := cc.Pipeline()
		for _, m := range slotMarks() {
			pipe.SetNX(ctx, m[0], "0", 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("knownStore: %v", err)
		}
		return
	}
	if err := c.SetNX(ctx, epochKey, "0", 0).Err(); err != nil {
		t.Fatalf("knownStore: %v", err)
	}
}

// known is knownStore for a throwaway standalone server (or master).
func known(t testing.TB, s *testutil.RedisServer) {
	t.Helper()
	if _, err := s.Command("SET", epochKey, "0", "NX"); err != nil {
		t.Fatalf("known: %v", err)
	}
}

// knownCluster is knownStore for a throwaway cluster.
func knownCluster(t testing.TB, cl *testutil.RedisCluster) {
	t.Helper()
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cl.Addrs})
	defer c.Close()
	knownStore(t, c)
}

// knownSentinel is knownStore for a throwaway Sentinel deployment: its
// master, and its replica once it has the marker.
func knownSentinel(t testing.TB, s *testutil.RedisSentinel) {
	t.Helper()
	known(t, s.Master)
	if s.Replica != nil {
		waitFor(t, "the replica has the epoch marker", func() bool {
			v, err := s.Replica.Command("GET", epochKey)
			return err == nil && v != ""
		})
	}
}
