//go:build unix

package etcd

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mutexfx/mutexfx/drivers"
)

// lapse takes a lock of ttl through d and releases it, leaving d a lease
// of ttl's class that nobody renews, and revokes that lease as its expiry
// would.
func lapse(t *testing.T, d *Driver, ttl time.Duration) {
	t.Helper()
	ctx := t.Context()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "lapsed", Token: "x", TTL: ttl}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	if ok, err := d.Release(ctx, "lapsed", "x"); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	cli, err := d.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.leases.mu.Lock()
	l := d.leases.byTTL[leaseSeconds(ttl)]
	d.leases.mu.Unlock()
	if _, err := cli.Revoke(ctx, l.id); err != nil {
		t.Fatal(err)
	}
}

// TestExtendOntoLapsedLease: Extend to a ttl whose lease in the driver
// lapsed unused (its locks released long ago) extends the lock on a new
// lease, as an attempt with that ttl would take it on one, instead of
// failing.
func TestExtendOntoLapsedLease(t *testing.T) {
	c := singleMember(t)
	ctx := t.Context()
	d := open(t, Options{Endpoints: c.Endpoints()})
	const short, long = time.Second, 3 * time.Second
	lapse(t, d, long)
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "a", Token: "a", TTL: short}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	if ok, err := d.Extend(ctx, "a", "a", long); !ok || err != nil {
		t.Fatalf("Extend to %v = %v, %v; want true", long, ok, err)
	}
	if info, held, err := d.Inspect(ctx, "a"); err != nil || !held || info.TTL < long-time.Second {
		t.Fatalf("Inspect after the Extend = %+v, %v, %v; want held for about %v", info, held, err, long)
	}
}

// TestRenewOntoLapsedLease: a renewal that moves a lock to its ttl's
// lease (after an Extend to that ttl failed) finds that lease lapsed: it
// may fail once, but the next renewal gets a new lease, instead of every
// renewal failing until the lock is lost.
func TestRenewOntoLapsedLease(t *testing.T) {
	c := singleMember(t)
	ctx := t.Context()
	d := open(t, Options{Endpoints: c.Endpoints()})
	const short, long = time.Second, 3 * time.Second
	lapse(t, d, short)
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "a", Token: "a", TTL: long}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	batch := []drivers.Lease{{Key: "a", Token: "a", TTL: short}}
	first := d.Renew(ctx, batch)[0]
	if r := d.Renew(ctx, batch)[0]; r.Err != nil || !r.Held {
		t.Fatalf("renewals to %v = %+v, then %+v; want the second held", short, first, r)
	}
	got, err := d.cli.Load().Get(ctx, d.queue("a"), clientv3.WithPrefix())
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("queue of a: %v, %v", got, err)
	}
	if tr, err := d.cli.Load().TimeToLive(ctx, clientv3.LeaseID(got.Kvs[0].Lease)); err != nil || tr.TTL <= 0 || tr.TTL > leaseSeconds(short) {
		t.Fatalf("lease of a after the renewals: %+v, %v; want one of %d s", tr, err, leaseSeconds(short))
	}
}
