package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// replicaCluster starts a Cluster of three masters with a replica each,
// its markers written, and returns it with a driver on it built with opts
// (Addrs and Cluster set here), closed at the test's end.
func replicaCluster(t *testing.T, opts Options) (*testutil.RedisCluster, *Driver) {
	t.Helper()
	c := testutil.StartRedisClusterReplicas(t, 2*time.Second)
	knownCluster(t, c)
	for i, s := range []int{0, 5461, 10923} { // a slot of each master
		eventually(t, 20*time.Second, "the replica has the markers", func() bool {
			v, err := replicaRead(t, c.Replicas[i], slotMarks()[s][0])
			return err == nil && v != ""
		})
	}
	return c, clusterDriver(t, c, opts)
}

// clusterDriver is a driver on c built with opts, closed at the test's end.
func clusterDriver(t *testing.T, c *testutil.RedisCluster, opts Options) *Driver {
	t.Helper()
	opts.Addrs, opts.Cluster = c.Addrs, true
	if opts.PoolSize == 0 {
		opts.PoolSize = 1000 // see faultOptions
	}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	return d
}

// replicaGet reads key on a Cluster replica (READONLY), "" when missing.
func replicaGet(t *testing.T, r *testutil.RedisServer, key string) string {
	t.Helper()
	v, err := replicaRead(t, r, key)
	if err != nil {
		t.Fatalf("GET %s on the replica %s: %v", key, r.Addr, err)
	}
	return v
}

// replicaRead is replicaGet returning the error.
func replicaRead(t *testing.T, r *testutil.RedisServer, key string) (string, error) {
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr, OnConnect: func(ctx context.Context, cn *goredis.Conn) error {
		return cn.ReadOnly(ctx).Err()
	}})
	defer c.Close()
	v, err := c.Get(t.Context(), key).Result()
	if err == goredis.Nil {
		return "", nil
	}
	return v, err
}

// TestClusterMinReplicas: in a Cluster whose masters have a replica, an
// acquisition counts only once the replica of the lock's master confirmed
// it (WAIT on that master), by default. With that replica cut off, an
// acquisition there fails with ErrReplicas and leaves no lock, an
// extension and a renewal fail, and a lock handed to a waiter by a
// release is given up with ErrReplicas; the other masters' locks are
// acquired and renewed; minReplicas -1 waits for nothing.
func TestClusterMinReplicas(t *testing.T) {
	c, d := replicaCluster(t, Options{})
	ctx := t.Context()
	keys := byMaster(t, c, "redistest:minrep:", 4)
	acquire := func(d *Driver, key string) (drivers.AcquireResult, error) {
		return d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "tok-" + key, TTL: 10 * time.Second})
	}
	for m, ks := range keys {
		if res, err := acquire(d, ks[0]); err != nil || !res.Acquired {
			t.Fatalf("Acquire(%q) = %+v, %v", ks[0], res, err)
		}
		if v := replicaGet(t, c.Replicas[m], lockKey(ks[0])); v != "tok-"+ks[0] {
			t.Fatalf("replica %d has %q right after the acquisition; want the token (WAIT)", m, v)
		}
	}
	// A waiter queued for a lock of the victim's, its release messages
	// heard on the victim (a release hands a lock over only to a waiter
	// subscribed on the lock's node).
	waiter := clusterDriver(t, c, Options{})
	for i := 0; slot(DefaultChannel+":"+waiter.id) > 5460; i++ {
		waiter.id = "waiter" + itoa(i)
	}
	handed := keys[victim][1]
	if res, err := acquire(d, handed); err != nil || !res.Acquired {
		t.Fatalf("Acquire(%q) = %+v, %v", handed, res, err)
	}
	waited := make(chan error, 1)
	go func() {
		res, err := waiter.Acquire(ctx, drivers.AcquireRequest{Key: handed, Token: "waiter", TTL: 10 * time.Second, Wait: 10 * time.Second})
		if err == nil {
			err = errors.New("no error")
			if !res.Acquired {
				err = errors.New("not acquired, no error")
			}
		}
		waited <- err
	}()
	waitFor(t, "the waiter queued", func() bool { return d.Client().ZCard(ctx, queueKey(handed)).Val() == 1 })
	victimClient := goredis.NewClient(&goredis.Options{Addr: c.Nodes[victim].Addr})
	defer victimClient.Close()
	waitFor(t, "the waiter subscribed on the victim", func() bool {
		return victimClient.PubSubNumSub(ctx, DefaultChannel+":"+waiter.id).Val()[DefaultChannel+":"+waiter.id] == 1
	})

	c.CutReplication(t, victim)
	defer c.Thaw(t, victim)
	// Released before the waiter's next poll (its own WAIT would fail).
	if ok, err := d.Release(ctx, handed, "tok-"+handed); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	if err := <-waited; !errors.Is(err, ErrReplicas) {
		t.Fatalf("waiter handed the lock with replication cut: %v; want ErrReplicas", err)
	}
	if v, _ := c.Nodes[victim].Command("GET", lockKey(handed)); v == "waiter" {
		t.Fatal("the lock handed over stays the waiter's after ErrReplicas; want it given up")
	}
	if _, err := acquire(d, keys[victim][2]); !errors.Is(err, ErrReplicas) {
		t.Fatalf("Acquire with replication cut = %v; want ErrReplicas", err)
	}
	if v, err := c.Nodes[victim].Command("EXISTS", lockKey(keys[victim][2])); err != nil || v != "0" {
		t.Fatalf("lock key on the master after a failed acquisition: EXISTS = %q, %v; want released", v, err)
	}
	if ok, err := d.Extend(ctx, keys[victim][0], "tok-"+keys[victim][0], 10*time.Second); ok || !errors.Is(err, ErrReplicas) {
		t.Fatalf("Extend with replication cut = %v, %v; want false, ErrReplicas", ok, err)
	}
	var leases []drivers.Lease
	for _, ks := range keys {
		leases = append(leases, drivers.Lease{Key: ks[0], Token: "tok-" + ks[0], TTL: 10 * time.Second})
	}
	for i, r := range d.Renew(ctx, leases) {
		if i == victim && !errors.Is(r.Err, ErrReplicas) || i != victim && (r.Err != nil || !r.Held) {
			t.Fatalf("Renew of master %d's lease with the victim's replication cut = %+v", i, r)
		}
	}
	for m, ks := range keys {
		if res, err := acquire(d, ks[3]); m != victim && (err != nil || !res.Acquired) {
			t.Fatalf("Acquire(%q) on a master in sync = %+v, %v", ks[3], res, err)
		}
	}
	loose := clusterDriver(t, c, Options{MinReplicas: -1})
	if res, err := acquire(loose, keys[victim][2]); err != nil || !res.Acquired {
		t.Fatalf("Acquire with minReplicas -1 and replication cut = %+v, %v; want acquired", res, err)
	}
}

// TestClusterFailoverInSync: a lock acquired with the default minReplicas
// right before its master is killed is on the promoted replica, its
// holder's, and renews there; once released, it is granted again only
// after the restart wait (the driver cannot tell an in-sync promotion from
// one that lost writes), with a fence above the old one.
func TestClusterFailoverInSync(t *testing.T) {
	c, d := replicaCluster(t, Options{})
	ctx := t.Context()
	k := byMaster(t, c, "redistest:insync:", 1)[victim][0]
	// The lock must outlive the promotion, which under load takes
	// seconds: it cannot be renewed while its master is dead.
	const ttl = 5 * time.Second
	first, err := d.Acquire(ctx, drivers.AcquireRequest{Key: k, Token: "holder", TTL: ttl})
	if err != nil || !first.Acquired {
		t.Fatalf("Acquire = %+v, %v", first, err)
	}
	killed := time.Now()
	c.Nodes[victim].Kill()
	next := c.Promote(t, victim)
	if v, err := next.Command("GET", lockKey(k)); err != nil || v != "holder" {
		t.Fatalf("the promoted replica has %q, %v %v after the kill; want the holder's lock", v, err, time.Since(killed))
	}
	eventually(t, 10*time.Second, "the holder renews on the promoted replica", func() bool {
		r := d.Renew(ctx, []drivers.Lease{{Key: k, Token: "holder", TTL: ttl}})
		if r[0].Err == nil && !r[0].Held {
			t.Fatalf("the holder's lease is gone after an in-sync fail-over: %+v", r[0])
		}
		return r[0].Held
	})
	if ok, err := d.Release(ctx, k, "holder"); !ok || err != nil {
		t.Fatalf("Release on the promoted replica = %v, %v", ok, err)
	}
	fresh := clusterDriver(t, c, Options{})
	at, fence := grantedAfter(t, fresh, k, 30*time.Second)
	if waited := at.Sub(killed); waited < ttl {
		t.Fatalf("granted %v after the master's death; want the restart wait %v (the holder's ttl)", waited, ttl)
	}
	if fence <= first.Fence {
		t.Fatalf("fence after the fail-over %d <= fence before %d", fence, first.Fence)
	}
}

// TestClusterFailoverReplicationCut: the replica of a lock's master is cut
// off, the name is acquired again and again on the master (its fence
// counter grows there only), then held by a component, and the master is
// killed; its replica is promoted without those writes but with the slot's
// epoch marker. The holder is told it lost the lock before a driver that
// never saw the old master gets it there, which is not before the ttl has
// passed since the kill, and the next fence is above every fence handed
// out before.
func TestClusterFailoverReplicationCut(t *testing.T) {
	// No WAIT for the replica (minReplicas -1): the acquisitions must
	// succeed with replication cut, as they do for a user who turned it off.
	c, d := replicaCluster(t, Options{MinReplicas: -1})
	ctx := t.Context()
	x := byMaster(t, c, "redistest:cut:", 1)[victim][0]
	acquire := func(tok string) drivers.AcquireResult {
		t.Helper()
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: x, Token: tok, TTL: epochTTL})
		if err != nil || !res.Acquired {
			t.Fatalf("Acquire(%s) = %+v, %v", tok, res, err)
		}
		if ok, err := d.Release(ctx, x, tok); !ok || err != nil {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		return res
	}
	first := acquire("t0")
	waitFor(t, "the replica has the counter", func() bool { return replicaGet(t, c.Replicas[victim], fenceKey(x)) != "" })
	c.CutReplication(t, victim)
	for i := range 5 {
		acquire("t" + itoa(i+1))
	}
	// The holder's ttl (faultTTL) is shorter than the other drivers'
	// (epochTTL), so its driver is set up as docs/redis.md tells processes
	// with different ttls: restartWait at least the longest. Without it,
	// the holder's renewal or release may be the first call on the promoted
	// replica and start the slot's epoch with its own 1 s wait, which can
	// end before the fresh driver's first call: a grant 1 s after the kill.
	m := newMutexWith(t, Options{Addrs: c.Addrs, Cluster: true, PoolSize: 1000, MinReplicas: -1, RestartWait: epochTTL})
	l, err := m.Acquire(ctx, x[len("redistest:"):])
	if err != nil {
		t.Fatal(err)
	}
	told := make(chan time.Time, 1)
	stop := context.AfterFunc(l.Context(), func() { told <- time.Now() })
	defer stop()
	killed := time.Now()
	c.Nodes[victim].Kill()
	next := c.Promote(t, victim)
	if v, _ := next.Command("GET", lockKey(x)); v != "" {
		t.Fatalf("the promoted replica holds the lock (%q): replication was not cut", v)
	}
	fresh := clusterDriver(t, c, Options{MinReplicas: -1})
	at, fence := grantedAfter(t, fresh, x, 20*time.Second)
	if waited := at.Sub(killed); waited < epochTTL {
		t.Fatalf("granted %v after the master's death; want no grant within the ttl %v", waited, epochTTL)
	}
	select {
	case lost := <-told:
		if !lost.Before(at) {
			t.Fatalf("the holder was told %v after the new grant", lost.Sub(at))
		}
		t.Logf("holder told %v before the new grant", at.Sub(lost).Round(time.Millisecond))
	default:
		t.Fatal("the lock was granted again before its holder was told it lost it")
	}
	if fence <= l.Fence() || fence <= first.Fence {
		t.Fatalf("fence after the fail-over %d <= fence before %d", fence, l.Fence())
	}
}

// TestAcquireRidesOutAClusterFailover: a 30 s Acquire started while the
// lock's Cluster master is dead and before its replica is promoted
// succeeds after the promotion, with no error in between.
func TestAcquireRidesOutAClusterFailover(t *testing.T) {
	c, d := replicaCluster(t, Options{})
	m, err := component.New(component.Options{Driver: d, Prefix: "redistest:", TTL: faultTTL, RetryDelay: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	name := byMaster(t, c, "redistest:ride", 1)[victim][0][len("redistest:"):]
	c.Nodes[victim].Kill()
	type result struct {
		l   *component.Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := m.Acquire(context.Background(), name, component.WithTimeout(30*time.Second))
		done <- result{l, err}
	}()
	// The wait meets the dead master: the driver fails its key at once.
	waitFor(t, "the driver finds the master down", func() bool {
		_, err := d.Acquire(t.Context(), drivers.AcquireRequest{Key: "redistest:" + name, Token: "probe", TTL: faultTTL})
		return errors.Is(err, ErrUnavailable)
	})
	select {
	case r := <-done:
		t.Fatalf("Acquire ended while the master was down: %v, %v", r.l, r.err)
	default:
	}
	promoted := time.Now()
	c.Promote(t, victim)
	r := <-done
	if r.err != nil || r.l == nil {
		t.Fatalf("Acquire = %v, %v; want the lock after the promotion", r.l, r.err)
	}
	t.Logf("acquired %v after the promotion began", time.Since(promoted).Round(time.Millisecond))
	if _, err := r.l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
