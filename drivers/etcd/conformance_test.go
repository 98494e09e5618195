//go:build unix

package etcd

import (
	"testing"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestConformance runs the conformance suite on a single-member cluster.
func TestConformance(t *testing.T) {
	c := singleMember(t)
	drivertest.Run(t, drivertest.Harness{New: func(t testing.TB) drivers.Driver {
		d, err := New(Options{Endpoints: c.Endpoints()}, nil)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return d
	}})
}

// TestConformanceThreeMembers runs the conformance suite on a 3-member
// cluster, each driver on another member.
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
	}})
}
