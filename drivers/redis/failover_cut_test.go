package redis

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestSentinelFailoverReplicationCut: replication is cut, a name is
// acquired again and again on the master (its fence counter grows there
// only), and the master is killed. The promoted replica has an older copy
// of the counter and none of the held lock: the driver, reaching another
// server process, grants nothing there until the ttl has passed, and the
// next fence is above every fence handed out before.
func TestSentinelFailoverReplicationCut(t *testing.T) {
	s := testutil.StartRedisSentinel(t, testutil.SentinelOptions{Replica: true, LinkProxy: true, DownAfter: 300 * time.Millisecond})
	knownSentinel(t, s)
	// No WAIT for the replica (minReplicas -1): the acquisitions must
	// succeed with replication cut, as they do for a user who turned it off.
	d := rawDriver(t, Options{Addrs: []string{s.Addr}, MasterName: s.MasterName, DialTimeout: time.Second, MinReplicas: -1})
	ctx := t.Context()
	acquire := func(tok string) drivers.AcquireResult {
		t.Helper()
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "x", Token: tok, TTL: epochTTL})
		if err != nil || !res.Acquired {
			t.Fatalf("Acquire(%s) = %+v, %v", tok, res, err)
		}
		return res
	}
	first := acquire("t0")
	if ok, err := d.Release(ctx, "x", "t0"); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	waitFor(t, "the replica has the counter", func() bool {
		v, err := s.Replica.Command("GET", fenceKey("x"))
		return err == nil && v != ""
	})
	s.Link.Cut()
	var last drivers.AcquireResult
	for i := range 5 {
		tok := "t" + strconv.Itoa(i+1)
		last = acquire(tok)
		if i < 4 {
			if ok, err := d.Release(ctx, "x", tok); !ok || err != nil {
				t.Fatalf("Release = %v, %v", ok, err)
			}
		}
	}
	v, err := s.Replica.Command("GET", fenceKey("x"))
	if n, perr := strconv.ParseUint(v, 10, 64); err != nil || perr != nil || n >= last.Fence {
		t.Fatalf("replica's counter %q (%v); want an older copy than %d", v, err, last.Fence)
	}
	old := s.Master.Addr
	killed := time.Now()
	s.Master.Kill()
	next := s.WaitFailover(t, old)
	if v, _ := next.Command("GET", lockKey("x")); v != "" {
		t.Fatalf("the promoted replica holds the lock (%q): replication was not cut", v)
	}
	at, fence := grantedAfter(t, d, "x", 20*time.Second)
	if waited := at.Sub(killed); waited < epochTTL {
		t.Fatalf("granted %v after the master's death; want no grant within the ttl %v", waited, epochTTL)
	}
	if fence <= last.Fence || fence <= first.Fence {
		t.Fatalf("fence after the fail-over %d <= fence before %d", fence, last.Fence)
	}
	t.Logf("fail-over %s -> %s; granted %v after the kill; fences %d -> %d", old, next.Addr,
		at.Sub(killed).Round(time.Millisecond), last.Fence, fence)
}

// TestSentinelUnknownMaster: a masterName the Sentinels do not know fails
// with an error that says so, not that they are unreachable.
func TestSentinelUnknownMaster(t *testing.T) {
	s := testutil.StartRedisSentinel(t, testutil.SentinelOptions{})
	d := rawDriver(t, Options{Addrs: []string{s.Addr}, MasterName: "nosuch", DialTimeout: time.Second})
	_, err := d.Acquire(t.Context(), drivers.AcquireRequest{Key: "x", Token: "a", TTL: epochTTL})
	want := "redis: acquire: redis: sentinels at " + s.Addr + ` know no master named "nosuch"`
	if err == nil || err.Error() != want {
		t.Fatalf("Acquire with an unknown master name = %v; want %q", err, want)
	}
}

// TestStandaloneOnClusterNode: a standalone config pointed at a Cluster
// node fails every call with ErrClusterNode, for names of every slot.
func TestStandaloneOnClusterNode(t *testing.T) {
	c := testutil.StartRedisCluster(t)
	d := rawDriver(t, Options{Addrs: []string{c.Addrs[0]}})
	for _, key := range []string{"a", "b", "c", "d", "e"} {
		_, err := d.Acquire(t.Context(), drivers.AcquireRequest{Key: key, Token: "a", TTL: epochTTL})
		if !errors.Is(err, ErrClusterNode) || !strings.Contains(err.Error(), "this server is a Cluster node: set cluster: true") {
			t.Fatalf("Acquire(%q) on a Cluster node without cluster: true = %v; want ErrClusterNode", key, err)
		}
	}
}
