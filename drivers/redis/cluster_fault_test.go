package redis

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// victim is the index of the master the cluster tests kill.
const victim = 0

// faultCluster starts a 3-master cluster whose masters keep serving their
// own slots while another master is down: by default a cluster without
// replicas refuses every key once it has flagged a master as failed (after
// the node timeout), which would hide what the driver does.
func faultCluster(t *testing.T) *testutil.RedisCluster {
	t.Helper()
	c := testutil.StartRedisCluster(t)
	knownCluster(t, c)
	for _, n := range c.Nodes {
		if _, err := n.Command("CONFIG", "SET", "cluster-require-full-coverage", "no"); err != nil {
			t.Fatalf("config set on %s: %v", n.Addr, err)
		}
	}
	return c
}

// faultOptions are the driver options of the cluster fault tests. The pool
// is larger than the dials that fail while a master is down: once failed
// dials reach the pool size, go-redis starts a goroutine that redials
// every second, and it outlives Close by up to a second (goleak).
func faultOptions(c *testutil.RedisCluster) Options {
	return Options{Addrs: c.Addrs, Cluster: true, PoolSize: 1000}
}

// faultDriver starts a faultCluster and a driver on it, closed at the
// test's end.
func faultDriver(t *testing.T) (*testutil.RedisCluster, *Driver) {
	t.Helper()
	c := faultCluster(t)
	d, err := New(faultOptions(c))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return c, d
}

// byMaster returns, for each master of c, n keys (prefix + a number) whose
// Redis lock key it serves, as the masters themselves say (the others
// answer MOVED).
func byMaster(t *testing.T, c *testutil.RedisCluster, prefix string, n int) [][]string {
	t.Helper()
	out := make([][]string, len(c.Nodes))
	for i, full := 0, 0; full < len(c.Nodes); i++ {
		if i > 10000 {
			t.Fatal("no keys found for every master")
		}
		key := prefix + strconv.Itoa(i)
		owner := -1
		for j, node := range c.Nodes {
			if _, err := node.Command("GET", lockKey(key)); err == nil {
				owner = j
				break
			}
		}
		if owner < 0 {
			t.Fatalf("no master serves %q", lockKey(key))
		}
		if len(out[owner]) < n {
			out[owner] = append(out[owner], key)
			if len(out[owner]) == n {
				full++
			}
		}
	}
	return out
}

// TestClusterMasterDown: one of three Cluster masters is killed. The locks
// of the two live masters keep renewing every tick (even the first tick,
// when the live masters also lost their scripts and need the EVAL
// fallback), and their keys can be acquired; the dead master's leases and
// keys fail at once with ErrUnavailable once its first network error is
// seen. Restarted, its slots grant again once the ttl has passed.
func TestClusterMasterDown(t *testing.T) {
	c, d := faultDriver(t)
	ctx := t.Context()
	keys := byMaster(t, c, "redistest:cluster-down:", 21)
	var leases []drivers.Lease
	var owner []int
	for m, ks := range keys {
		for _, k := range ks[:20] {
			l := drivers.Lease{Key: k, Token: "t", TTL: 10 * time.Second}
			if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: k, Token: "t", TTL: l.TTL}); err != nil || !res.Acquired {
				t.Fatalf("Acquire(%q) = %+v, %v", k, res, err)
			}
			leases = append(leases, l)
			owner = append(owner, m)
		}
	}
	d.Renew(ctx, leases) // every master has the script
	for i, n := range c.Nodes {
		if i != victim {
			if _, err := n.Command("SCRIPT", "FLUSH"); err != nil {
				t.Fatal(err)
			}
		}
	}

	c.Nodes[victim].Kill()
	ticker := time.NewTicker(100 * time.Millisecond) // a renewal period
	defer ticker.Stop()
	for tick := range 15 {
		start := time.Now()
		res := d.Renew(ctx, leases)
		took := time.Since(start)
		for i, r := range res {
			switch {
			case owner[i] != victim && (r.Err != nil || !r.Held):
				t.Fatalf("tick %d: lease %q on a live master: %+v; want held", tick, leases[i].Key, r)
			case owner[i] == victim && r.Err == nil:
				t.Fatalf("tick %d: lease %q on the dead master: %+v; want an error", tick, leases[i].Key, r)
			case owner[i] == victim && tick > 0 && !errors.Is(r.Err, ErrUnavailable):
				t.Fatalf("tick %d: lease %q on the dead master: %v; want ErrUnavailable", tick, leases[i].Key, r.Err)
			}
		}
		if tick > 0 && took > 250*time.Millisecond {
			t.Fatalf("tick %d: renewal took %v; want the dead master skipped", tick, took)
		}
		<-ticker.C
	}
	for m, ks := range keys {
		k := ks[20] // never acquired yet
		start := time.Now()
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: k, Token: "n", TTL: 10 * time.Second})
		switch {
		case m != victim && (err != nil || !res.Acquired):
			t.Fatalf("Acquire(%q) on a live master = %+v, %v; want acquired", k, res, err)
		case m == victim && (!errors.Is(err, ErrUnavailable) || time.Since(start) > 50*time.Millisecond):
			t.Fatalf("Acquire(%q) on the dead master = %+v, %v after %v; want ErrUnavailable at once", k, res, err, time.Since(start))
		}
	}

	restarted := time.Now()
	c.Nodes[victim].Restart()
	k := keys[victim][20]
	live := leases[:0:0]
	for i, l := range leases {
		if owner[i] != victim {
			live = append(live, l)
		}
	}
	// The restarted master forgot its locks: its slots grant nothing until
	// the longest ttl the driver used (10 s) has passed since it started.
	eventually(t, 30*time.Second, "the restarted master grants locks", func() bool {
		d.Renew(ctx, live) // the live masters' leases stay held meanwhile
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: k, Token: "n", TTL: 10 * time.Second})
		return err == nil && res.Acquired
	})
	if waited := time.Since(restarted); waited < 10*time.Second {
		t.Fatalf("the restarted master granted a lock %v after its restart; want no grant within the 10s ttl", waited)
	}
	// Its data is gone (no persistence): its old leases are not held; the
	// new lock is, and renews.
	res := d.Renew(ctx, append(leases, drivers.Lease{Key: k, Token: "n", TTL: 10 * time.Second}))
	for i, r := range res {
		want := i == len(leases) || owner[i] != victim
		if r.Err != nil || r.Held != want {
			t.Fatalf("after the restart, lease %d: %+v; want held %v", i, r, want)
		}
	}
}

// TestClusterMasterDownLocks: with a component, the locks of a killed
// Cluster master are lost no later than their expiry, while those of the
// live masters stay held, renewed, for many ttls.
func TestClusterMasterDownLocks(t *testing.T) {
	c := faultCluster(t)
	m := newMutexWith(t, faultOptions(c))
	ctx := t.Context()
	names := byMaster(t, c, "redistest:", 5)
	locks := make([][]*component.Lock, len(names))
	for i, ns := range names {
		for _, n := range ns {
			l, err := m.Acquire(ctx, n[len("redistest:"):])
			if err != nil {
				t.Fatal(err)
			}
			locks[i] = append(locks[i], l)
		}
	}
	killed := time.Now()
	c.Nodes[victim].Kill()
	for _, l := range locks[victim] {
		lostBy(t, l, killed.Add(faultTTL))
	}
	// Three ttls: without renewals, every live lock would have expired.
	window := time.NewTimer(time.Until(killed.Add(3 * faultTTL)))
	defer window.Stop()
	lost := make(chan *component.Lock, len(names)*5)
	for i, ls := range locks {
		for _, l := range ls {
			if i != victim {
				stop := context.AfterFunc(l.Context(), func() { lost <- l })
				defer stop()
			}
		}
	}
	select {
	case l := <-lost:
		t.Fatalf("lock %q on a live master ended after %v: %v", l.Name(), time.Since(killed), context.Cause(l.Context()))
	case <-window.C:
	}
	for i, ls := range locks {
		for _, l := range ls {
			if err := l.Err(); (err == nil) != (i != victim) {
				t.Fatalf("lock %q (master %d) has error %v after %v", l.Name(), i, err, time.Since(killed))
			}
		}
	}
}

// TestClusterSlotMovedWhileMasterDown: while a master is down, calls for
// its slots are refused without a request, so no MOVED reply tells
// go-redis that a slot moved; the probe has the slot map reloaded, and
// the key, now served by another master, can be acquired again within
// seconds (not when go-redis's map is a minute old).
func TestClusterSlotMovedWhileMasterDown(t *testing.T) {
	c, d := faultDriver(t)
	ctx := t.Context()
	k := byMaster(t, c, "redistest:moved:", 1)[victim][0]
	if _, err := d.Acquire(ctx, drivers.AcquireRequest{Key: k, Token: "a", TTL: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	c.Nodes[victim].Kill()
	if _, err := d.Acquire(ctx, drivers.AcquireRequest{Key: k, Token: "b", TTL: 10 * time.Second}); err == nil {
		t.Fatal("Acquire on the killed master succeeded")
	}
	if _, err := d.Acquire(ctx, drivers.AcquireRequest{Key: k, Token: "b", TTL: 10 * time.Second}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("second Acquire on the killed master = %v; want ErrUnavailable", err)
	}

	// Give the slot to another master, as a failover or a resharding does.
	to, other := c.Nodes[1], c.Nodes[2]
	slot, err := to.Command("CLUSTER", "KEYSLOT", lockKey(k))
	if err != nil {
		t.Fatal(err)
	}
	id, err := to.Command("CLUSTER", "MYID")
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"CLUSTER", "BUMPEPOCH"},
		{"CLUSTER", "SETSLOT", slot, "NODE", id},
	} {
		if _, err := to.Command(cmd...); err != nil {
			t.Fatalf("%v on %s: %v", cmd, to.Addr, err)
		}
	}
	if _, err := other.Command("CLUSTER", "SETSLOT", slot, "NODE", id); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "both live masters agree on the slot's new master", func() bool {
		_, errTo := to.Command("GET", lockKey(k))
		_, errOther := other.Command("GET", lockKey(k))
		return errTo == nil && errOther != nil
	})

	moved := time.Now()
	eventually(t, 10*time.Second, "the key acquired on its new master", func() bool {
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: k, Token: "c", TTL: 10 * time.Second})
		return err == nil && res.Acquired
	})
	t.Logf("acquired on the new master %v after the move", time.Since(moved).Round(time.Millisecond))
}
