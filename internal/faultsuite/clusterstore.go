//go:build linux

package faultsuite

import (
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// clusterFailoverGap is the least time between two Cluster fail-overs of
// a run (the old master, restarted empty, rejoins as a replica and syncs);
// one due sooner is skipped.
const clusterFailoverGap = 5 * time.Second

// setupCluster starts a Redis Cluster of three masters with a replica each.
// The children reach its nodes directly (a node's replies name other nodes'
// addresses, which a proxy would not rewrite), every node given as a seed.
// A fail-over kills the master of one of the run's locks (a different lock
// each time) and promotes its replica.
func setupCluster(tb testing.TB) *store {
	tb.Helper()
	c := testutil.StartRedisClusterReplicas(tb, 2*time.Second)
	seeds := append(append([]string(nil), c.Addrs...), addrsOf(c.Replicas)...)
	st := &store{target: func([]string) string { return strings.Join(seeds, ",") }}
	var last time.Time
	n := 0
	st.failover = func(tb testing.TB, lag time.Duration) bool {
		if time.Since(last) < clusterFailoverGap || len(st.keys) == 0 {
			return false
		}
		ok := clusterFailover(tb, c, "{faults:"+st.keys[n%len(st.keys)]+"}", lag)
		if ok {
			last = time.Now()
			n++
		}
		return ok
	}
	return st
}

// addrsOf returns the servers' addresses.
func addrsOf(servers []*testutil.RedisServer) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.Addr
	}
	return out
}

// clusterFailover kills the master serving key once its replica is in
// sync, promotes the replica (CLUSTER FAILOVER TAKEOVER) and restarts the
// old master empty, which rejoins as the new master's replica. With lag,
// the replication is cut that long before the master dies (see
// RedisCluster.CutReplication). It reports false, doing nothing, when the
// replica is not in sync yet.
func clusterFailover(tb testing.TB, c *testutil.RedisCluster, key string, lag time.Duration) bool {
	i := -1
	for j, n := range c.Nodes {
		if _, err := n.Command("GET", key); err == nil { // the others answer MOVED
			i = j
		}
	}
	if i < 0 {
		return false
	}
	info, err := c.Nodes[i].Command("INFO", "replication")
	if err != nil || !strings.Contains(info, "connected_slaves:1") || !strings.Contains(info, "state=online") {
		return false
	}
	if lag > 0 {
		c.CutReplication(tb, i)
		time.Sleep(lag) // the length of the cut is the fault
	}
	old := c.Nodes[i]
	old.Kill()
	c.Promote(tb, i)
	old.Restart()
	return true
}
