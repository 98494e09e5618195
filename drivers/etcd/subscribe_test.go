//go:build unix

package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestLeaseRevokedReportsLost: when an attempt finds the driver's lease
// gone (revoked here behind its back), every lock held on it is reported
// lost at once through Subscribe, long before its next renewal (a third of
// the 9 s ttl), and the attempt gets its lock on a new lease.
func TestLeaseRevokedReportsLost(t *testing.T) {
	c := singleMember(t)
	ctx := t.Context()
	d := open(t, Options{Endpoints: c.Endpoints()})
	m, err := component.New(component.Options{Driver: d, TTL: 9 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	l, err := m.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, 10*time.Second, "the subscription", func() bool { return d.subs.Len() == 1 })

	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	got, err := cli.Get(ctx, d.queue(component.DefaultPrefix+"a"), clientv3.WithPrefix())
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("queue of a: %v, %v", got, err)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(got.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	l2, err := m.Acquire(ctx, "b")
	if err != nil {
		t.Fatalf("Acquire on a new lease: %v", err)
	}
	defer l2.Release(ctx)
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatalf("lock on the revoked lease not lost %v after the revocation", time.Since(revoked))
	}
	if !errors.Is(context.Cause(l.Context()), component.ErrLost) {
		t.Fatalf("cause %v; want ErrLost", context.Cause(l.Context()))
	}
	if ok, err := l.Release(ctx); ok || err != nil {
		t.Fatalf("Release of the lost lock = %v, %v; want false", ok, err)
	}
}
