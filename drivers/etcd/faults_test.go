//go:build unix

package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestFaultsThreeMembers runs contending holders on a 3-member cluster
// through member faults: each kills, pauses or restarts a member while
// four components on their own drivers (two with every endpoint, one on
// each of two members) take one lock in turn. No holder may overlap
// another that was not told of its loss, fences only grow, no write with
// an older fence, and the lock keeps moving once the cluster has a quorum.
func TestFaultsThreeMembers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T, c *testutil.EtcdCluster) (heal func())
	}{
		{"LeaderKilled", func(t *testing.T, c *testutil.EtcdCluster) func() {
			m := c.Members[leader(t, c)]
			m.Kill()
			return m.Restart
		}},
		{"FollowerKilled", func(t *testing.T, c *testutil.EtcdCluster) func() {
			m := c.Members[(leader(t, c)+1)%3]
			m.Kill()
			return m.Restart
		}},
		{"LeaderPaused", func(t *testing.T, c *testutil.EtcdCluster) func() {
			m := c.Members[leader(t, c)]
			m.Pause()
			return m.Resume
		}},
		{"FollowerPaused", func(t *testing.T, c *testutil.EtcdCluster) func() {
			m := c.Members[(leader(t, c)+1)%3]
			m.Pause()
			return m.Resume
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testutil.StartEtcd(t, 3)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			all := c.Endpoints()
			r := newResource()
			wg := contend(ctx, t, r, [][]string{all, all, {c.Members[0].ClientAddr}, {c.Members[1].ClientAddr}}, 20*time.Millisecond)
			defer wg.Wait()
			defer cancel()
			waitAcquisitions(t, r, 10, 20*time.Second)
			heal := tc.fault(t, c)
			// The components with every endpoint go on with a quorum left.
			waitAcquisitions(t, r, 10, 20*time.Second)
			heal()
			waitAcquisitions(t, r, 10, 20*time.Second)
			cancel()
			wg.Wait()
			r.check(t, 30)
		})
	}
}

// TestLostBeforeExpiry: a holder whose link to the cluster stalls (a proxy
// that stops forwarding) is told its lock is lost before the lease expires
// and the lock goes to another holder; its release then reports false.
// After the link heals, the driver works again.
func TestLostBeforeExpiry(t *testing.T) {
	for _, mode := range []string{"stall", "cut"} {
		t.Run(mode, func(t *testing.T) {
			c := testutil.StartEtcd(t, 1)
			p := testutil.NewProxy(t, c.Members[0].ClientAddr)
			ctx := t.Context()
			via := open(t, Options{Endpoints: []string{p.Addr}, DialTimeout: time.Second})
			direct := open(t, Options{Endpoints: c.Endpoints()})
			a := mutex(t, via)
			b := mutex(t, direct)
			l, err := a.Acquire(ctx, "link")
			if err != nil {
				t.Fatal(err)
			}
			if mode == "stall" {
				p.Stall()
				defer p.Resume()
			} else {
				p.Cut()
				defer p.Heal()
			}
			cut := time.Now()
			l2, err := b.Acquire(ctx, "link", component.WithTimeout(20*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Release(ctx)
			took := time.Since(cut)
			select {
			case <-l.Done():
			default:
				t.Fatalf("lock taken by another holder %v after the link broke, its holder not told", took)
			}
			if !errors.Is(context.Cause(l.Context()), component.ErrLost) {
				t.Fatalf("cause %v; want ErrLost", context.Cause(l.Context()))
			}
			if l2.Fence() <= l.Fence() {
				t.Fatalf("fence %d after %d", l2.Fence(), l.Fence())
			}
			if took < faultTTL {
				t.Fatalf("taken %v after the link broke; the ttl is %v", took, faultTTL)
			}
			if mode == "stall" {
				p.Resume()
			} else {
				p.Heal()
			}
			if ok, err := l.Release(ctx); ok {
				t.Fatalf("release of the lost lock = %v, %v; want false", ok, err)
			}
			if ok, err := l2.Release(ctx); !ok || err != nil {
				t.Fatalf("release = %v, %v", ok, err)
			}
			// The first attempts may find the connection still down.
			for i := 0; ; i++ {
				l3, err := a.Acquire(ctx, "link", component.WithTimeout(20*time.Second))
				if err == nil {
					l3.Release(ctx)
					break
				}
				if i == 5 {
					t.Fatalf("acquire after the link healed: %v", err)
				}
			}
		})
	}
}

// mutex returns a component with the fault tests' ttl on d, closed at the
// end of the test.
func mutex(t *testing.T, d *Driver) *component.Mutex {
	t.Helper()
	return drivertest.Mutex(t, component.Options{Driver: d, TTL: faultTTL})
}
