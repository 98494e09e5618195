package redis

import (
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestClusterRedirectAfterFailover: a driver that checked a slot on its
// master, and made no call while that master died, its replica was
// promoted and it came back empty as the new master's replica, must not be
// granted the slot's locks on the promoted replica without checking it
// there: the old master's address now answers MOVED, and a script sent
// there must not be carried over to the promoted replica unchecked. The
// promoted replica missed the last acquisition (replication was cut), so a
// grant there within the ttl would overlap its holder.
func TestClusterRedirectAfterFailover(t *testing.T) {
	c, d := replicaCluster(t, Options{MinReplicas: -1})
	ctx := t.Context()
	x := byMaster(t, c, "redistest:redirect:", 1)[victim][0]
	first, err := d.Acquire(ctx, drivers.AcquireRequest{Key: x, Token: "t0", TTL: epochTTL})
	if err != nil || !first.Acquired {
		t.Fatalf("Acquire(t0) = %+v, %v", first, err)
	}
	if ok, err := d.Release(ctx, x, "t0"); !ok || err != nil {
		t.Fatalf("Release(t0) = %v, %v", ok, err)
	}
	waitFor(t, "the replica has the counter", func() bool { return replicaGet(t, c.Replicas[victim], fenceKey(x)) != "" })
	c.CutReplication(t, victim)
	held, err := d.Acquire(ctx, drivers.AcquireRequest{Key: x, Token: "held", TTL: epochTTL})
	if err != nil || !held.Acquired {
		t.Fatalf("Acquire(held) = %+v, %v", held, err)
	}
	killed := time.Now()
	old := c.Nodes[victim]
	old.Kill()
	next := c.Promote(t, victim)
	if v, _ := next.Command("GET", lockKey(x)); v != "" {
		t.Fatalf("the promoted replica holds the lock (%q): replication was not cut", v)
	}
	old.Restart()
	waitFor(t, "the old master answers MOVED for the key", func() bool {
		_, err := old.Command("GET", lockKey(x))
		return err != nil && strings.Contains(err.Error(), "MOVED ")
	})
	at, fence := grantedAfter(t, d, x, 20*time.Second)
	if waited := at.Sub(killed); waited < epochTTL {
		t.Fatalf("granted %v after the master's death, fence %d (holder's %d); want no grant within the ttl %v",
			waited, fence, held.Fence, epochTTL)
	}
	if fence <= held.Fence {
		t.Fatalf("fence after the fail-over %d <= the holder's %d", fence, held.Fence)
	}
}

// TestClusterSlotWithoutRunRecord: a slot whose marker has no run_id
// record beside it (the record was written while replication was cut and
// the replica holding the marker was promoted) counts as checked on
// another process: a driver's first check there starts a new epoch.
func TestClusterSlotWithoutRunRecord(t *testing.T) {
	c := testutil.StartRedisCluster(t)
	knownCluster(t, c)
	d := clusterDriver(t, c, Options{})
	x := byMaster(t, c, "redistest:norun:", 1)[victim][0]
	_, before := grantedAfter(t, d, x, 20*time.Second)
	if ok, err := d.Release(t.Context(), x, "new"); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	run := slotMarks()[slot(lockKey(x))][0] + runSuffix
	if n, err := c.Nodes[victim].Command("DEL", run); err != nil || n != "1" {
		t.Fatalf("DEL %s = %q, %v; want 1", run, n, err)
	}
	dropped := time.Now()
	at, fence := grantedAfter(t, clusterDriver(t, c, Options{}), x, 20*time.Second)
	if waited := at.Sub(dropped); waited < epochTTL {
		t.Fatalf("granted %v after the record was dropped; want no grant within the ttl %v", waited, epochTTL)
	}
	if fence <= before {
		t.Fatalf("fence %d <= the one before %d", fence, before)
	}
}

// TestClusterRestartChecksBeforeFirstScript: a Cluster master restarts
// with its epoch marker and run record kept (a persistence file that
// missed the last acquisition). The driver, which made no call while it was
// down, finds the slot checked (same node, same gen), then go-redis drops
// the dead idle connection and dials a new one for the script: that
// connection finds the new run_id and must check the slot on itself before
// the script runs there, which then grants nothing for the restart wait.
func TestClusterRestartChecksBeforeFirstScript(t *testing.T) {
	c := testutil.StartRedisCluster(t)
	knownCluster(t, c)
	d := clusterDriver(t, c, Options{})
	ctx := t.Context()
	x := byMaster(t, c, "redistest:restartfirst:", 1)[victim][0]
	held, err := d.Acquire(ctx, drivers.AcquireRequest{Key: x, Token: "held", TTL: 4 * time.Second})
	if err != nil || !held.Acquired {
		t.Fatalf("Acquire(held) = %+v, %v", held, err)
	}
	m := slotMarks()[slot(lockKey(x))]
	node := c.Nodes[victim]
	mark, _ := node.Command("GET", m[0])
	run, _ := node.Command("GET", m[0]+runSuffix)
	fence, _ := node.Command("GET", fenceKey(x))
	if mark == "" || run == "" {
		t.Fatalf("marker %q run %q", mark, run)
	}
	node.Restart()
	waitFor(t, "the restarted master serves its slots", func() bool {
		info, err := node.Command("CLUSTER", "INFO")
		return err == nil && strings.Contains(info, "cluster_state:ok")
	})
	// what a persistence file written before the last acquisition keeps
	for _, kv := range [][2]string{{m[0], mark}, {m[0] + runSuffix, run}, {fenceKey(x), fence}} {
		if _, err := node.Command("SET", kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := node.Command("DEL", lockKey(x)); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: x, Token: "new", TTL: 4 * time.Second})
	t.Logf("first Acquire after the restart = %+v, %v", res, err)
	if n, err := d.health.node(ctx, lockKey(x)); err == nil {
		_, due := d.slots.need(slot(lockKey(x)), n)
		t.Logf("after it: gen %d, slot check due again: %v", n.gen.Load(), due)
	}
	if err == nil && res.Acquired {
		t.Fatalf("granted %v after the master's restart (new run_id) while %q may still hold it", time.Since(restarted), "held")
	}
	res, err = d.Acquire(ctx, drivers.AcquireRequest{Key: x, Token: "new", TTL: 4 * time.Second})
	if err == nil && res.Acquired {
		t.Fatalf("second Acquire granted %v after the master's restart", time.Since(restarted))
	}
}
