//go:build unix

package etcd

import (
	"testing"

	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m, runChild) }

// singleMember starts a single-member cluster for the test.
func singleMember(t testing.TB) *testutil.EtcdCluster {
	t.Helper()
	return testutil.StartEtcd(t, 1)
}

// open returns a driver on endpoints, closed at the end of the test.
func open(t testing.TB, opts Options) *Driver {
	t.Helper()
	d, err := New(opts, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	drivertest.CloseAtEnd(t, d)
	return d
}
