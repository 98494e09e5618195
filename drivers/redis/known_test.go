package redis

import (
	"context"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// knownStore writes the epoch markers of a store the test knows to have
// granted no lock yet (a throwaway server it just started), as an operator
// may: its first acquisitions then wait for nothing (the brand-new-store
// wait has its own tests in epoch_test.go). Cluster: every slot's marker,
// and beside it its master's run_id (see slotEpochScript).
func knownStore(t testing.TB, c goredis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	if cc, ok := c.(*goredis.ClusterClient); ok {
		knownSlots(t, cc)
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

// knownSlots is knownStore for a Cluster: each slot's marker "0" and its
// master's run_id record.
func knownSlots(t testing.TB, cc *goredis.ClusterClient) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	runs := map[string]string{}
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
		info, err := m.Info(ctx, "server").Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		runs[m.Options().Addr] = infoField(info, "run_id")
		return nil
	})
	if err != nil {
		t.Fatalf("knownStore: %v", err)
	}
	// In batches small enough to fit the socket buffers: go-redis gives a
	// pipeline's whole write one deadline (5 s), which 32,768 commands in
	// one pipeline missed on a loaded machine, the nodes reading them
	// slowly ("knownStore: write tcp …: i/o timeout").
	pipe := cc.Pipeline()
	for s, m := range slotMarks() {
		c, err := cc.MasterForKey(ctx, m[0])
		if err != nil {
			t.Fatalf("knownStore: %v", err)
		}
		run := runs[c.Options().Addr]
		if run == "" {
			t.Fatalf("knownStore: no run_id for the master %s of %s (masters: %v)", c.Options().Addr, m[0], runs)
		}
		pipe.SetNX(ctx, m[0], "0", 0)
		pipe.SetNX(ctx, m[0]+runSuffix, run, 0)
		if (s+1)%knownBatch != 0 && s+1 < len(slotMarks()) {
			continue
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatalf("knownStore: %v", err)
		}
	}
}

// knownBatch is how many slots knownSlots writes per pipeline.
const knownBatch = 512
