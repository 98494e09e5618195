package redis

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestMinReplicas: in Sentinel mode with a replica, an acquisition counts
// only once the replica confirmed it (WAIT), by default. With replication
// stalled, an acquisition fails with ErrReplicas and leaves no lock, an
// extension and a renewal fail, a lock handed to a waiter by a release is
// given up with ErrReplicas, a handover by a stranger's token (which
// writes nothing) answers nothing and no error; minReplicas -1 waits for
// nothing. A lock acquired right before the master is killed is on the
// promoted replica, its holder's.
func TestMinReplicas(t *testing.T) {
	s := testutil.StartRedisSentinel(t, testutil.SentinelOptions{Replica: true, LinkProxy: true, DownAfter: 300 * time.Millisecond})
	knownSentinel(t, s)
	opts := Options{Addrs: []string{s.Addr}, MasterName: s.MasterName, DialTimeout: time.Second}
	d := rawDriver(t, opts)
	ctx := t.Context()
	acquire := func(d *Driver, key string) (drivers.AcquireResult, error) {
		return d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "tok-" + key, TTL: 10 * time.Second})
	}
	if res, err := acquire(d, "x"); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	if v, err := s.Replica.Command("GET", lockKey("x")); err != nil || v != "tok-x" {
		t.Fatalf("replica has %q, %v right after the acquisition; want the token (WAIT)", v, err)
	}

	// A waiter queued for a lock d holds.
	if res, err := acquire(d, "h"); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	waiter := rawDriver(t, opts)
	waited := make(chan error, 1)
	go func() {
		res, err := waiter.Acquire(ctx, drivers.AcquireRequest{Key: "h", Token: "waiter", TTL: 10 * time.Second, Wait: 10 * time.Second})
		if err == nil {
			err = fmt.Errorf("acquired %v, no error", res.Acquired)
		}
		waited <- err
	}()
	waitFor(t, "the waiter queued and subscribed", func() bool {
		return d.Client().ZCard(ctx, queueKey("h")).Val() == 1 && numSub(t, d, waiter.channel()) == 1
	})

	s.Link.Stall()
	if ok, err := d.Release(ctx, "h", "tok-h"); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	if err := <-waited; !errors.Is(err, ErrReplicas) {
		t.Fatalf("waiter handed the lock with replication stalled: %v; want ErrReplicas", err)
	}
	if v, _ := s.Master.Command("GET", lockKey("h")); v == "waiter" {
		t.Fatal("the lock handed over stays the waiter's after ErrReplicas; want it given up")
	}
	if _, err := acquire(d, "y"); !errors.Is(err, ErrReplicas) {
		t.Fatalf("Acquire with replication stalled = %v; want ErrReplicas", err)
	}
	if v, err := s.Master.Command("EXISTS", lockKey("y")); err != nil || v != "0" {
		t.Fatalf("lock key on the master after a failed acquisition: EXISTS = %q, %v; want released", v, err)
	}
	if ok, err := d.Extend(ctx, "x", "tok-x", 10*time.Second); ok || !errors.Is(err, ErrReplicas) {
		t.Fatalf("Extend with replication stalled = %v, %v; want false, ErrReplicas", ok, err)
	}
	r := d.Renew(ctx, []drivers.Lease{{Key: "x", Token: "tok-x", TTL: 10 * time.Second}, {Key: "gone", Token: "t", TTL: time.Second}})
	if !errors.Is(r[0].Err, ErrReplicas) || r[1].Err != nil || r[1].Held {
		t.Fatalf("Renew with replication stalled = %+v; want ErrReplicas for the held lease, not held for the gone one", r)
	}
	// A call that wrote nothing is not failed by the replicas' lag.
	stranger := drivers.AcquireRequest{Key: "x", Token: "next", TTL: 10 * time.Second}
	if released, res, err := d.Handover(ctx, "x", "stranger", stranger); released || res.Acquired || err != nil {
		t.Fatalf("Handover with a stranger's token, replication stalled = %v, %+v, %v; want nothing", released, res, err)
	}
	loose := rawDriver(t, Options{Addrs: opts.Addrs, MasterName: opts.MasterName, DialTimeout: time.Second, MinReplicas: -1})
	if res, err := acquire(loose, "z"); err != nil || !res.Acquired {
		t.Fatalf("Acquire with minReplicas -1 and replication stalled = %+v, %v; want acquired", res, err)
	}
	s.Link.Resume()

	if res, err := acquire(d, "w"); err != nil || !res.Acquired {
		t.Fatalf("Acquire after the link resumed = %+v, %v", res, err)
	}
	old := s.Master.Addr
	s.Master.Kill()
	next := s.WaitFailover(t, old)
	if v, err := next.Command("GET", lockKey("w")); err != nil || v != "tok-w" {
		t.Fatalf("the promoted replica has %q, %v for a lock acquired right before the kill; want its token", v, err)
	}
}
