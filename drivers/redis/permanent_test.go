package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestPermanentErrors: refused credentials and permissions, a Cluster node
// behind a standalone driver, an unknown Sentinel master and a bad
// database number are permanent; fail-over and network errors are not.
func TestPermanentErrors(t *testing.T) {
	drivertest.CheckPermanent(t, permanent, []drivertest.Classified{
		{Err: errors.New("WRONGPASS invalid username-password pair or user is disabled."), Permanent: true},
		{Err: errors.New("NOAUTH Authentication required."), Permanent: true},
		{Err: errors.New("NOPERM User app has no permissions to run the 'evalsha' command"), Permanent: true},
		{Err: fmt.Errorf("redis: acquire: %w", ErrClusterNode), Permanent: true},
		{Err: &causeError{msg: "redis: sentinels know no master", err: errors.New("redis: nil"), is: errUnknownMaster}, Permanent: true},
		{Err: errors.New("ERR DB index is out of range"), Permanent: true},
		{Err: errors.New("READONLY You can't write against a read only replica."), Permanent: false},
		{Err: errors.New("LOADING Redis is loading the dataset in memory"), Permanent: false},
		{Err: errors.New("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), Permanent: false},
		{Err: errors.New("CLUSTERDOWN The cluster is down"), Permanent: false},
		{Err: errors.New("TRYAGAIN Multiple keys request during rehashing of slot"), Permanent: false},
		{Err: fmt.Errorf("redis: acquire: %w", ErrUnavailable), Permanent: false},
		{Err: fmt.Errorf("dial tcp: %w", syscall.ECONNREFUSED), Permanent: false},
		{Err: context.DeadlineExceeded, Permanent: false},
	})
}

// TestAcquirePermanentACL: on a server with ACL users, an Acquire waiting
// 5 s with a wrong password (WRONGPASS), or as a user refused the driver's
// scripts (NOPERM), fails within a second, without the password.
func TestAcquirePermanentACL(t *testing.T) {
	s, _ := aclServer(t, map[string][]any{
		"app":    {"~*", "&*", "+@all"},
		"noeval": {"~*", "&*", "+@all", "-@scripting"},
	})
	for _, tc := range []struct{ name, user, password string }{
		{"wrongPassword", "app", "Wr0ngPW"},
		{"noScripts", "noeval", "pw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := standalone(t, Options{Addrs: []string{s.Addr}, Username: tc.user, Password: tc.password})
			err := drivertest.AcquireFailsAtOnce(t, d)
			if strings.Contains(err.Error(), "Wr0ngPW") {
				t.Fatalf("error shows the password: %v", err)
			}
		})
	}
}

// TestAcquirePermanentClusterNode: a standalone driver on a Cluster node
// fails its Acquire at once with ErrClusterNode.
func TestAcquirePermanentClusterNode(t *testing.T) {
	s := testutil.StartRedis(t, "--cluster-enabled", "yes")
	d := standalone(t, Options{Addrs: []string{s.Addr}})
	if err := drivertest.AcquireFailsAtOnce(t, d); !errors.Is(err, ErrClusterNode) {
		t.Fatalf("Acquire = %v; want ErrClusterNode", err)
	}
}

// TestAcquirePermanentUnknownMaster: a Sentinel driver whose sentinels
// know no master of its masterName fails its Acquire at once.
func TestAcquirePermanentUnknownMaster(t *testing.T) {
	s := testutil.StartRedisSentinel(t, testutil.SentinelOptions{})
	d := standalone(t, Options{Addrs: []string{s.Addr}, MasterName: "nosuch"})
	if err := drivertest.AcquireFailsAtOnce(t, d); !errors.Is(err, errUnknownMaster) {
		t.Fatalf("Acquire = %v; want an unknown master", err)
	}
}
