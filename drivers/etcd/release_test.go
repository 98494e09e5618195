package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestReleaseUnanswered: a release that never reaches the store (the link
// is cut during it) fails with an error, not "not held", and the driver
// deletes the lock's key once the link is back, while its other lock
// keeps their shared lease alive: another holder then takes the lock.
func TestReleaseUnanswered(t *testing.T) {
	c := testutil.StartEtcd(t, 1)
	p := testutil.NewProxy(t, c.Members[0].ClientAddr)
	ctx := t.Context()
	a := mutex(t, open(t, Options{Endpoints: []string{p.Addr}, DialTimeout: time.Second}))
	b := mutex(t, open(t, Options{Endpoints: c.Endpoints()}))
	l, err := a.Acquire(ctx, "released")
	if err != nil {
		t.Fatal(err)
	}
	keep, err := a.Acquire(ctx, "kept") // renews the lease the released lock's key is on
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Release(ctx)
	p.Cut()
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	ok, err := l.Release(rctx)
	cancel()
	p.Heal()
	if ok || err == nil {
		t.Fatalf("release over a cut link = %v, %v; want an error", ok, err)
	}
	l2, err := b.Acquire(ctx, "released", component.WithTimeout(2*faultTTL))
	if err != nil {
		t.Fatalf("acquire of the released lock while the lease lives on: %v", err)
	}
	defer l2.Release(ctx)
	if err := keep.Err(); err != nil {
		t.Fatalf("the other lock ended: %v; the test needs its lease renewed", err)
	}
}
