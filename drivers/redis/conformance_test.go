package redis

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
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

// TestCluster runs the conformance suite on a real 3-master Redis Cluster
// started from the local redis-server, and checks the slot computation and
// the per-slot renewal there.
func TestCluster(t *testing.T) {
	c := testutil.StartRedisCluster(t)
	knownCluster(t, c)
	opts := Options{Addrs: c.Addrs, Cluster: true}
	t.Run("Conformance", func(t *testing.T) {
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
	})
	t.Run("KeySlot", func(t *testing.T) {
		for _, n := range []string{"", "a", "}x", "{a}b", "ü", strings.Repeat("}{", 100)} {
			for _, k := range []string{lockKey(n), fenceKey(n)} {
				got, err := testutil.RedisCommand(c.Addrs[0], "CLUSTER", "KEYSLOT", k)
				if err != nil {
					t.Fatal(err)
				}
				if got != strconv.Itoa(slot(k)) {
					t.Fatalf("CLUSTER KEYSLOT %q = %s; slot() = %d", k, got, slot(k))
				}
			}
		}
	})
	t.Run("PrunesUnusedMasters", func(t *testing.T) {
		d, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close(context.Background())
		h := d.health
		n, err := h.node(t.Context(), lockKey("prune"))
		if err != nil {
			t.Fatal(err)
		}
		// Two masters that left long ago: one up, one still down (its
		// probe, not simulated here, forgets it); and one up, used lately.
		long := time.Now().Add(-2 * pruneAfter)
		gone, down := &node{h: h, addr: "192.0.2.1:6379", used: long}, &node{h: h, addr: "192.0.2.2:6379", used: long}
		down.down.Store(true)
		recent := &node{h: h, addr: "192.0.2.3:6379", used: time.Now().Add(-pruneAfter / 2)}
		h.mu.Lock()
		h.nodes[gone.addr], h.nodes[down.addr], h.nodes[recent.addr] = gone, down, recent
		delete(h.nodes, n.addr) // so that the next lookup sees a new master
		h.mu.Unlock()
		if _, err := h.node(t.Context(), lockKey("prune")); err != nil {
			t.Fatal(err)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.nodes[gone.addr] != nil || h.nodes[down.addr] != down || h.nodes[recent.addr] != recent || h.nodes[n.addr] == nil {
			t.Fatalf("nodes after a new master: %v; want the long unused up one dropped, the others kept", slices.Sorted(maps.Keys(h.nodes)))
		}
		delete(h.nodes, down.addr)
	})
	t.Run("RenewPerSlot", func(t *testing.T) {
		d, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close(context.Background())
		ctx := t.Context()
		var leases []drivers.Lease
		for i := range 300 {
			// 30 s: 300 acquisitions take seconds on a loaded machine
			l := drivers.Lease{Key: "redistest:renew:" + strconv.Itoa(i), Token: "t", TTL: time.Minute}
			if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: l.Key, Token: l.Token, TTL: 30 * time.Second}); err != nil || !res.Acquired {
				t.Fatalf("Acquire = %+v, %v", res, err)
			}
			leases = append(leases, l)
		}
		d.Renew(ctx, leases) // loads the script on every node
		rt := &roundTrips{}
		d.Client().AddHook(rt)
		for i, r := range d.Renew(ctx, leases) {
			if r.Err != nil || !r.Held {
				t.Fatalf("lease %d: %+v", i, r)
			}
		}
		if n := rt.n.Load(); n != 1 {
			t.Fatalf("%d pipelines for 300 leases; want 1 (one round trip per node)", n)
		}
	})
}
