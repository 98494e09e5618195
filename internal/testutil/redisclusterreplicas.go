package testutil

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/internal/poll"
)

// StartRedisClusterReplicas starts a Redis Cluster of three masters, as
// StartRedisCluster, and one replica of each (c.Replicas[i] of
// c.Nodes[i]), and waits until every replica is in sync. nodeTimeout is
// the cluster-node-timeout: how long a master must not answer before its
// replica fails it over on its own (Promote does it at once).
func StartRedisClusterReplicas(t testing.TB, nodeTimeout time.Duration) *RedisCluster {
	t.Helper()
	c := startCluster(t, nodeTimeout)
	ids := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		id, err := n.Command("CLUSTER", "MYID")
		if err != nil {
			t.Fatalf("cluster myid on %s: %v", n.Addr, err)
		}
		ids[i] = id
		r := startClusterNode(t, nodeTimeout)
		if _, err := r.Command("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(n.Port)); err != nil {
			t.Fatalf("cluster meet from %s: %v", r.Addr, err)
		}
		c.Replicas = append(c.Replicas, r)
	}
	for i, r := range c.Replicas {
		await(t, "the replica knows its master", func() (bool, string) {
			_, err := r.Command("CLUSTER", "REPLICATE", ids[i])
			return err == nil, fmt.Sprint(err)
		})
	}
	// Every master must know every replica before a test kills one: a
	// master learns of a node from the gossip of nodes it knows, and a
	// replica promoted after its master died, whom no living master had
	// heard of, would stay unknown to them for good.
	for i, r := range c.Replicas {
		rid, err := r.Command("CLUSTER", "MYID")
		if err != nil {
			t.Fatalf("cluster myid on %s: %v", r.Addr, err)
		}
		for _, n := range c.Nodes {
			await(t, "every master knows the replica", func() (bool, string) {
				nodes, err := n.Command("CLUSTER", "NODES")
				return err == nil && replicaLine(nodes, strings.TrimSpace(rid), strings.TrimSpace(ids[i])), nodes
			})
		}
	}
	for i := range c.Nodes {
		c.WaitInSync(t, i)
	}
	return c
}

// replicaLine reports whether CLUSTER NODES output lists node id as a
// replica of master.
func replicaLine(nodes, id, master string) bool {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && f[0] == id && strings.Contains(f[2], "slave") && f[3] == master {
			return true
		}
	}
	return false
}

// WaitInSync waits until the master c.Nodes[i] has its replica online.
func (c *RedisCluster) WaitInSync(t testing.TB, i int) {
	t.Helper()
	await(t, "replica in sync", func() (bool, string) {
		info, err := c.Nodes[i].Command("INFO", "replication")
		return err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online"), info
	})
}

// CutReplication keeps the next writes of master c.Nodes[i] off its
// replica: the replica is frozen (SIGSTOP) and the master drops its link
// (CLIENT KILL TYPE replica), so that it cannot catch up until Promote or
// Thaw.
func (c *RedisCluster) CutReplication(t testing.TB, i int) {
	t.Helper()
	if err := c.Replicas[i].Signal(sigStop); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Nodes[i].Command("CLIENT", "KILL", "TYPE", "replica"); err != nil {
		t.Fatalf("client kill type replica on %s: %v", c.Nodes[i].Addr, err)
	}
}

// Thaw continues a replica frozen by CutReplication.
func (c *RedisCluster) Thaw(t testing.TB, i int) {
	t.Helper()
	if err := c.Replicas[i].Signal(sigCont); err != nil {
		t.Fatal(err)
	}
}

// Promote makes c.Replicas[i] the master of its slots at once (CLUSTER
// FAILOVER TAKEOVER: no agreement of the other masters needed, its master
// may be dead), thawing it first, and waits until it serves them. The
// replica and master then trade places in c (Nodes, Addrs, Replicas).
func (c *RedisCluster) Promote(t testing.TB, i int) *RedisServer {
	t.Helper()
	r := c.Replicas[i]
	_ = r.Signal(sigCont)
	if _, err := r.Command("CLUSTER", "FAILOVER", "TAKEOVER"); err != nil {
		t.Fatalf("cluster failover takeover on %s: %v", r.Addr, err)
	}
	c.WaitMaster(t, i, r)
	return r
}

// WaitMaster waits until r, a replica of c.Nodes[i] (promoted by Promote
// or on its own), is a master whose slots the other masters route to it,
// and then trades the places of r and c.Nodes[i] in c.
func (c *RedisCluster) WaitMaster(t testing.TB, i int, r *RedisServer) {
	t.Helper()
	id, err := r.Command("CLUSTER", "MYID")
	if err != nil {
		t.Fatalf("cluster myid on %s: %v", r.Addr, err)
	}
	var info string
	bumped := time.Now()
	if !poll.Until(30*time.Second, 20*time.Millisecond, func() bool {
		info, err = r.Command("INFO", "replication")
		ok := err == nil && strings.Contains(info, "role:master")
		for j, n := range c.Nodes {
			if ok && j != i {
				nodes, err := n.Command("CLUSTER", "NODES")
				ok = err == nil && masterLine(nodes, id)
			}
		}
		if !ok && strings.Contains(info, "role:master") && time.Since(bumped) > 3*time.Second {
			// A takeover by a replica that had not yet heard the
			// cluster's current epoch claims the slots with the dead
			// master's own config epoch: the others keep routing them to
			// it, and no collision resolution runs with a dead node. A
			// new epoch makes the claim win.
			_, _ = r.Command("CLUSTER", "BUMPEPOCH")
			bumped = time.Now()
		}
		return ok
	}) {
		t.Fatalf("%s not a master serving its slots within 30 s (%q, %v); the others see it as:%s",
			r.Addr, info, err, c.seenAs(i, strings.TrimSpace(id)))
	}
	c.Replicas[i], c.Nodes[i] = c.Nodes[i], r
	c.Addrs[i] = r.Addr
}

// seenAs returns the line of node id in the CLUSTER NODES output of every
// node but c.Nodes[i], for a failure's message.
func (c *RedisCluster) seenAs(i int, id string) string {
	var b strings.Builder
	for j, n := range c.Nodes {
		if j == i {
			continue
		}
		nodes, err := n.Command("CLUSTER", "NODES")
		line := fmt.Sprint(err)
		for _, l := range strings.Split(nodes, "\n") {
			if strings.HasPrefix(l, id) {
				line = l
			}
		}
		fmt.Fprintf(&b, "\n  %s: %s", n.Addr, line)
	}
	return b.String()
}

// masterLine reports whether CLUSTER NODES output lists node id as a
// master with slots.
func masterLine(nodes, id string) bool {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) > 8 && f[0] == id && strings.Contains(f[2], "master") {
			return true
		}
	}
	return false
}

// startClusterNode starts one cluster-enabled redis-server.
func startClusterNode(t testing.TB, nodeTimeout time.Duration) *RedisServer {
	t.Helper()
	dir := t.TempDir()
	return StartRedis(t, "--cluster-enabled", "yes",
		"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
		"--repl-diskless-sync-delay", "0")
}
