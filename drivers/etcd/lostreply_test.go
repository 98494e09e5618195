//go:build unix

package etcd

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mutexfx/mutexfx/drivers"
)

// TestLostAcquireAnswerLeavesNoKey: an Acquire whose transaction the
// store applied but whose answer was lost (a link reset, a deadline), then
// a cleanup release that fails too (the link still down): once the link is
// back the driver deletes the queue key that attempt may have put. It sat
// on the lease the driver's other locks of the same ttl keep alive, and
// the lock stayed taken for every other process for as long as those were
// renewed.
func TestLostAcquireAnswerLeavesNoKey(t *testing.T) {
	c := singleMember(t)
	var loseTxnAnswer, cut atomic.Bool
	d := driverVia(t, c, grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if cut.Load() {
			return status.Error(codes.Unavailable, "link cut (test)")
		}
		if strings.HasSuffix(method, "/Txn") && loseTxnAnswer.CompareAndSwap(true, false) {
			if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
				return err
			}
			cut.Store(true) // the answer is lost, and the link with it
			return status.Error(codes.Unavailable, "answer lost (test)")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}))
	ctx := t.Context()
	const ttl = time.Second
	kept := drivers.Lease{Key: "kept", Token: "k", TTL: ttl}
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: kept.Key, Token: kept.Token, TTL: ttl}); err != nil || !res.Acquired {
		t.Fatalf("Acquire kept: %+v, %v", res, err)
	}

	loseTxnAnswer.Store(true)
	_, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "stuck", Token: "s", TTL: ttl})
	if err == nil {
		t.Fatal("Acquire with its answer lost: no error")
	}
	// The component's cleanup: a release, which fails while the link is down.
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = d.Release(rctx, "stuck", "s")
	cancel()
	if err == nil {
		t.Fatal("Release over the cut link: no error")
	}
	cut.Store(false) // the link is back

	other := open(t, Options{Endpoints: c.Endpoints()})
	deadline := time.Now().Add(5 * leaseSecondsDur(ttl))
	for time.Now().Before(deadline) {
		// d renews its other lock, as its component does every ttl/3
		if r := d.Renew(ctx, []drivers.Lease{kept}); r[0].Err != nil || !r[0].Held {
			t.Fatalf("renew kept: %+v", r[0])
		}
		res, err := other.Acquire(ctx, drivers.AcquireRequest{Key: "stuck", Token: "o", TTL: ttl, Wait: ttl / 3})
		if err != nil {
			t.Fatal(err)
		}
		if res.Acquired {
			return
		}
	}
	info, ok, err := other.Inspect(ctx, "stuck")
	t.Fatalf("lock never freed after %v (nobody wants it in the first driver); Inspect: %+v, %v, %v",
		5*leaseSecondsDur(ttl), info, ok, err)
}

// TestLateDeleteSparesLaterKey: the delete of a key an Acquire with a
// lost answer may have put can itself go unanswered and still be applied
// later (a reset link whose request had reached the store, a proposal
// committed after a leader change), after a later attempt of the driver
// put its own key at the same place and took the lock. That delete must
// not take the later holder's key: with "delete whatever is at the
// driver's place" it did, and another process took the lock while the
// holder still had it (the fault suite's unsignalled overlap).
func TestLateDeleteSparesLaterKey(t *testing.T) {
	c := singleMember(t)
	var loseTxnAnswer, holdDelete atomic.Bool
	held := make(chan func() error, 1) // a delete not sent yet, already given up on
	d := driverVia(t, c, grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if !strings.HasSuffix(method, "/Txn") {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		if loseTxnAnswer.CompareAndSwap(true, false) {
			if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
				return err
			}
			return status.Error(codes.Unavailable, "answer lost (test)")
		}
		if deletes(req) && holdDelete.CompareAndSwap(true, false) {
			held <- func() error {
				return invoker(context.WithoutCancel(ctx), method, req, new(pb.TxnResponse), cc, opts...)
			}
			return status.Error(codes.Unavailable, "no answer yet (test)")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}))
	ctx := t.Context()
	const key, ttl = "late", 5 * time.Second

	loseTxnAnswer.Store(true)
	if _, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "a", TTL: ttl}); err == nil {
		t.Fatal("Acquire with its answer lost: no error")
	}
	holdDelete.Store(true)
	// The component's next attempts, each with a new token, until one
	// gets the lock (nobody else wants it).
	var token string
	for _, tok := range []string{"b", "c", "d"} {
		res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: ttl})
		if err == nil && res.Acquired {
			token = tok
			break
		}
	}
	if token == "" {
		t.Fatal("no attempt got the free lock")
	}
	select {
	case send := <-held: // the store applies the delete it was sent earlier
		if err := send(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("the driver sent no delete of the key the lost Acquire may have put")
	}

	other := open(t, Options{Endpoints: c.Endpoints()})
	if res, err := other.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "o", TTL: ttl}); err != nil || res.Acquired {
		t.Fatalf("another driver's Acquire while %q holds the lock: %+v, %v", token, res, err)
	}
	if ok, err := d.Extend(ctx, key, token, ttl); err != nil || !ok {
		t.Fatalf("Extend %q: %v, %v", token, ok, err)
	}
}

// deletes reports whether req is a transaction that deletes a key.
func deletes(req any) bool {
	txn, ok := req.(*pb.TxnRequest)
	if !ok {
		return false
	}
	for _, op := range txn.Success {
		if op.GetRequestDeleteRange() != nil {
			return true
		}
	}
	return false
}

func leaseSecondsDur(ttl time.Duration) time.Duration {
	return time.Duration(leaseSeconds(ttl)) * time.Second
}
