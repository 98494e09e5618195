//go:build unix

package etcd

import (
	"testing"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestConformance runs the conformance suite on a single-member cluster,
// with the driver's shortest ttl (MinTTL, a second) where the suite's
// default, 600 ms, is refused.
func TestConformance(t *testing.T) {
	c := singleMember(t)
	drivertest.Run(t, drivertest.Harness{New: func(t testing.TB) drivers.Driver {
		d, err := New(Options{Endpoints: c.Endpoints()}, nil)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return d
	}, TTL: MinTTL})
}

// TestConformanceThreeMembers runs the conformance suite on a 3-member
// cluster, each driver on another member, with the ttl of TestConformance.
func TestConformanceThreeMembers(t *testing.T) {
	c := testutil.StartEtcd(t, 3)
	n := 0
	drivertest.Run(t, drivertest.Harness{New: func(t testing.TB) drivers.Driver {
		n++
		d, err := New(Options{Endpoints: []string{c.Members[n%3].ClientAddr}}, nil)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return d
	}, TTL: MinTTL})
}
