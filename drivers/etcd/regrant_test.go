//go:build unix

package etcd

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/mutexfx/mutexfx/drivers"
)

// TestRenewAfterForcedRegrant: while a renewal waits for its lease's keys,
// an operator deletes the lock's key by force and this driver takes the
// name again for another token, putting its key back on the same lease.
// The renewal reports the first token's lock not held (the lease's keys
// are names only), and the new holder's lock stays held.
func TestRenewAfterForcedRegrant(t *testing.T) {
	c := singleMember(t)
	var hold atomic.Bool
	reached, release := make(chan struct{}), make(chan struct{})
	d := driverVia(t, c, grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/LeaseTimeToLive") && hold.CompareAndSwap(true, false) {
			close(reached)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}))
	ctx := t.Context()
	const key, ttl = "regrant", 2 * time.Second
	first, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: ttl})
	if err != nil || !first.Acquired {
		t.Fatalf("Acquire a = %+v, %v", first, err)
	}
	hold.Store(true)
	renewed := make(chan drivers.RenewResult, 1)
	go func() { renewed <- d.Renew(ctx, []drivers.Lease{{Key: key, Token: "a", TTL: ttl}})[0] }()
	<-reached // the lease is renewed; the renewal asks for its keys

	e := d.find(key)
	wk := e.wk
	d.unuse(e)
	cli, err := d.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := cli.Delete(ctx, wk); err != nil || resp.Deleted != 1 {
		t.Fatalf("force delete of %s: %+v, %v", wk, resp, err)
	}
	second, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "b", TTL: ttl})
	if err != nil || !second.Acquired || second.Fence <= first.Fence {
		t.Fatalf("Acquire b after the force delete = %+v, %v; want it with a fence above %d", second, err, first.Fence)
	}
	close(release)

	if r := <-renewed; r.Err != nil || r.Held {
		t.Fatalf("Renew of a's lock = %+v; want not held: its key was deleted and b holds the name", r)
	}
	if r := d.Renew(ctx, []drivers.Lease{{Key: key, Token: "b", TTL: ttl}})[0]; r.Err != nil || !r.Held {
		t.Fatalf("Renew of b's lock = %+v; want held", r)
	}
}
