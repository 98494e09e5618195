//go:build unix

package etcd

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/mutexfx/mutexfx/drivers"
)

// rpcCounter counts the gRPC calls and streams a client opens, by method.
type rpcCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *rpcCounter) add(method string) {
	c.mu.Lock()
	c.n[method]++
	c.mu.Unlock()
}

func (c *rpcCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func (c *rpcCounter) options() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.add(method)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			c.add(method)
			return streamer(ctx, desc, cc, method, opts...)
		}),
	}
}

// TestRenewTenThousand: 10,000 held locks are renewed by one Renew call
// that opens one lease keep-alive stream and one TimeToLive call (the check
// that every key is still on the lease), and nothing else.
func TestRenewTenThousand(t *testing.T) {
	c := singleMember(t)
	rpcs := &rpcCounter{n: map[string]int{}}
	d := driverVia(t, c, rpcs.options()...)
	ctx := t.Context()
	const n = 10000
	leases := make([]drivers.Lease, n)
	var wg sync.WaitGroup
	var failed atomic.Int32
	for w := range 32 {
		wg.Go(func() {
			for i := w; i < n; i += 32 {
				l := drivers.Lease{Key: "renew/" + strconv.Itoa(i), Token: "t" + strconv.Itoa(i), TTL: 5 * time.Second}
				res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: l.Key, Token: l.Token, TTL: l.TTL})
				if err != nil || !res.Acquired {
					failed.Add(1)
				}
				leases[i] = l
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d acquisitions failed", f)
	}
	rpcs.take()
	for i, r := range d.Renew(ctx, leases) {
		if r.Err != nil || !r.Held {
			t.Fatalf("lease %d: %+v", i, r)
		}
	}
	got := rpcs.take()
	want := map[string]int{"/etcdserverpb.Lease/LeaseKeepAlive": 1, "/etcdserverpb.Lease/LeaseTimeToLive": 1}
	if len(got) != len(want) || got["/etcdserverpb.Lease/LeaseKeepAlive"] != 1 || got["/etcdserverpb.Lease/LeaseTimeToLive"] != 1 {
		t.Fatalf("Renew of %d locks made %v; want %v", n, got, want)
	}
	// A lock released behind the driver's back is reported lost.
	if ok, err := open(t, Options{Endpoints: c.Endpoints()}).Release(ctx, leases[7].Key, leases[7].Token); !ok || err != nil {
		t.Fatalf("Release by another driver = %v, %v", ok, err)
	}
	res := d.Renew(ctx, leases[:10])
	for i, r := range res {
		if r.Err != nil || r.Held != (i != 7) {
			t.Errorf("lease %d after lock 7 was released elsewhere: %+v", i, r)
		}
	}
}
