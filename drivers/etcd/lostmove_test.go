//go:build unix

package etcd

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mutexfx/mutexfx/drivers"
)

// loseTxnAnswer returns an interceptor that, once lose is set, lets the
// next transaction reach the store and loses its answer (a reset link, a
// deadline), clearing lose.
func loseTxnAnswer(lose *atomic.Bool) grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if !strings.HasSuffix(method, "/Txn") || !lose.CompareAndSwap(true, false) {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "answer lost (test)")
	})
}

// TestRenewAfterLostMoveAnswer: an Extend to a longer ttl moves the lock's
// key to that ttl's lease; the store applies the move but its answer is
// lost, so the Extend fails, and the component goes on renewing with the
// earlier ttl, whose lease no longer carries the key. The renewal reports
// the lock held (its key is in the store: nobody else can have it), and
// the driver's next attempt on the name neither gets it nor hands out its
// fence again; after the release the next holder's fence is higher.
func TestRenewAfterLostMoveAnswer(t *testing.T) {
	c := singleMember(t)
	var lose atomic.Bool
	d := driverVia(t, c, loseTxnAnswer(&lose))
	ctx := t.Context()
	const key, short, long = "moved", time.Second, 3 * time.Second
	a, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: short})
	if err != nil || !a.Acquired {
		t.Fatalf("Acquire a = %+v, %v", a, err)
	}
	lose.Store(true)
	if ok, err := d.Extend(ctx, key, "a", long); err == nil {
		t.Fatalf("Extend with its answer lost = %v, nil; want an error", ok)
	}
	if r := d.Renew(ctx, []drivers.Lease{{Key: key, Token: "a", TTL: short}})[0]; r.Err != nil || !r.Held {
		t.Errorf("Renew of a after the lost move = %+v; want held: its key is in the store", r)
	}
	b, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "b", TTL: short})
	switch {
	case err != nil:
		t.Fatalf("Acquire b: %v", err)
	case b.Acquired && b.Fence <= a.Fence:
		t.Fatalf("Acquire b = %+v: a's fence %d again, a's key still in the store", b, a.Fence)
	case b.Acquired:
		t.Fatalf("Acquire b = %+v while a holds the lock; want not acquired", b)
	}
	if ok, err := d.Release(ctx, key, "a"); !ok || err != nil {
		t.Fatalf("Release a = %v, %v; want true", ok, err)
	}
	b, err = d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "b2", TTL: short})
	if err != nil || !b.Acquired || b.Fence <= a.Fence {
		t.Fatalf("Acquire after a's release = %+v, %v; want it with a fence above %d", b, err, a.Fence)
	}
}

// TestForgottenKeyGetsNoFenceAgain: after a move whose answer was lost
// (see TestRenewAfterLostMoveAnswer), the lock's earlier lease is revoked
// behind the driver's back: the driver counts the lock lost, though its key
// lives on, on the longer ttl's lease. The driver's next acquisition of the
// name must not take that key over, whose create revision was the lost
// lock's fence: it gets a new key, with a higher fence.
func TestForgottenKeyGetsNoFenceAgain(t *testing.T) {
	c := singleMember(t)
	var lose atomic.Bool
	d := driverVia(t, c, loseTxnAnswer(&lose))
	ctx := t.Context()
	const key, short, long = "forgotten", time.Second, 3 * time.Second
	a, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: short})
	if err != nil || !a.Acquired {
		t.Fatalf("Acquire a = %+v, %v", a, err)
	}
	first, err := d.leases.get(ctx, d.cli.Load(), short)
	if err != nil {
		t.Fatal(err)
	}
	lose.Store(true)
	if ok, err := d.Extend(ctx, key, "a", long); err == nil {
		t.Fatalf("Extend with its answer lost = %v, nil; want an error", ok)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Revoke(ctx, first.id); err != nil {
		t.Fatal(err)
	}
	if r := d.Renew(ctx, []drivers.Lease{{Key: key, Token: "a", TTL: short}})[0]; r.Err != nil || r.Held {
		t.Fatalf("Renew of a after its lease was revoked = %+v; want not held", r)
	}
	b, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "b", TTL: short})
	if err != nil || !b.Acquired || b.Fence <= a.Fence {
		t.Fatalf("Acquire b after a was lost = %+v, %v; want it with a fence above a's %d", b, err, a.Fence)
	}
}
