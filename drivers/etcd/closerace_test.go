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

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
)

// TestCloseLeavesNoLease: an Acquire under way when Close starts grants
// a lease (its ttl's first) while Close revokes the driver's leases. That
// lease must not outlive Close with a key on it: the attempt fails with
// ErrClosed, and no key of the driver is left in the store.
func TestCloseLeavesNoLease(t *testing.T) {
	c := singleMember(t)
	var holdGrant, holdRevoke atomic.Bool
	granting, grant := make(chan struct{}), make(chan struct{})
	revoking, revoke := make(chan struct{}), make(chan struct{})
	hold := func(ctx context.Context, reached, release chan struct{}) error {
		close(reached)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	d := driverVia(t, c, grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		switch {
		case strings.HasSuffix(method, "/LeaseGrant") && holdGrant.CompareAndSwap(true, false):
			if err := hold(ctx, granting, grant); err != nil {
				return err
			}
		case strings.HasSuffix(method, "/LeaseRevoke") && holdRevoke.CompareAndSwap(true, false):
			if err := hold(ctx, revoking, revoke); err != nil {
				return err
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}))
	ctx := t.Context()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "held", Token: "h", TTL: time.Second}); err != nil || !res.Acquired {
		t.Fatalf("Acquire held = %+v, %v", res, err)
	}
	holdGrant.Store(true)
	acquired := drivertest.AcquireAsync(ctx, d, drivers.AcquireRequest{Key: "late", Token: "l", TTL: 5 * time.Second})
	<-granting // the attempt asks for a lease of its ttl
	holdRevoke.Store(true)
	closed := make(chan error, 1)
	go func() { closed <- d.Close(context.Background()) }()
	<-revoking // Close revokes the leases it has
	close(grant)
	out := <-acquired
	close(revoke)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if out.Err == nil && out.Res.Acquired {
		t.Errorf("Acquire under way while Close revoked the leases = %+v; want ErrClosed", out.Res)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	got, err := cli.Get(ctx, DefaultKeyPrefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range got.Kvs {
		tr, err := cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("key %s left after Close, on a lease with %d s to live", kv.Key, tr.TTL)
	}
}

// TestExtendElsewhereKeepsTTL: a lock taken through one driver and
// extended through another, whose lease that driver cannot change (only
// renew), is not reported extended to a ttl longer than that lease keeps
// it: a holder told so would count on the lock for the whole ttl while the
// store frees it with its lease.
func TestExtendElsewhereKeepsTTL(t *testing.T) {
	c := singleMember(t)
	ctx := t.Context()
	a := open(t, Options{Endpoints: c.Endpoints()})
	b := open(t, Options{Endpoints: c.Endpoints()})
	const key, tok, ttl = "elsewhere", "t", time.Second
	if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: ttl}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	if ok, err := b.Extend(ctx, key, tok, ttl); !ok || err != nil {
		t.Errorf("Extend elsewhere within the lock's lease = %v, %v; want true", ok, err)
	}
	const longer = 10 * time.Second
	ok, err := b.Extend(ctx, key, tok, longer)
	if ok {
		info, held, ierr := b.Inspect(ctx, key)
		if ierr != nil || !held || info.TTL < longer-time.Second {
			t.Fatalf("Extend elsewhere to %v = true, then Inspect = %+v, %v, %v: the store keeps it %v", longer, info, held, ierr, info.TTL)
		}
	} else if err == nil {
		t.Fatalf("Extend elsewhere to %v = false, nil: the lock is held; want true or an error", longer)
	}
	if r := b.Renew(ctx, []drivers.Lease{{Key: key, Token: tok, TTL: longer}})[0]; r.Held {
		info, _, _ := b.Inspect(ctx, key)
		t.Fatalf("Renew elsewhere to %v = %+v; Inspect: the store keeps it %v", longer, r, info.TTL)
	}
}
