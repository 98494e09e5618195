//go:build unix

package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestReleaseUnanswered: a release that never reaches the store (the link
// is cut during it) fails with an error, not "not held"; once the link is
// back the lock is free again although the driver's other lock keeps
// their shared lease alive, and its next holder — in another driver or
// this one — gets a higher fence.
func TestReleaseUnanswered(t *testing.T) {
	for _, next := range []string{"another driver", "the same driver"} {
		t.Run(next, func(t *testing.T) {
			c := testutil.StartEtcd(t, 1)
			p := testutil.NewProxy(t, c.Members[0].ClientAddr)
			ctx := t.Context()
			a := mutex(t, open(t, Options{Endpoints: []string{p.Addr}, DialTimeout: time.Second}))
			b := a
			if next == "another driver" {
				b = mutex(t, open(t, Options{Endpoints: c.Endpoints()}))
			}
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
			if l2.Fence() <= l.Fence() {
				t.Fatalf("fence %d after the released lock's %d", l2.Fence(), l.Fence())
			}
			if err := keep.Err(); err != nil {
				t.Fatalf("the other lock ended: %v; the test needs its lease renewed", err)
			}
		})
	}
}
