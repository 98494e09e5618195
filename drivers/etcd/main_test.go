//go:build unix

package etcd

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

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

// driverVia returns a driver on its own client of c, whose gRPC calls go
// through opts (interceptors that count, lose or hold them), both closed
// at the end of the test.
func driverVia(t testing.TB, c *testutil.EtcdCluster, opts ...grpc.DialOption) *Driver {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, DialOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	d, err := NewWithClient(cli, Options{})
	if err != nil {
		t.Fatal(err)
	}
	drivertest.CloseAtEnd(t, d)
	return d
}
