//go:build linux

package faultsuite

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// setupEtcd starts a 3-member etcd cluster; each child reaches every
// member through a proxy of its own.
func setupEtcd(tb testing.TB) *store {
	tb.Helper()
	c := testutil.StartEtcd(tb, 3)
	return &store{
		upstreams:   c.Endpoints(),
		target:      func(a []string) string { return strings.Join(a, ",") },
		leaderKill:  func(down time.Duration) error { return killEtcdLeader(c, down) },
		memberPause: func(i int, d time.Duration) { pauseEtcdMember(c.Members[i], d) },
	}
}

// errNoLeader: no member reported itself the leader.
var errNoLeader = errors.New("faultsuite: no etcd member is the leader")

// killEtcdLeader kills the member that is the leader now (SIGKILL), keeps
// it down for down (the others elect a new leader meanwhile) and restarts
// it with its data.
func killEtcdLeader(c *testutil.EtcdCluster, down time.Duration) error {
	m, err := etcdLeader(c)
	if err != nil {
		return err
	}
	m.Kill()
	time.Sleep(down) // the outage's length is the fault
	m.Restart()
	return nil
}

// etcdLeader asks each member's status for the one that leads.
func etcdLeader(c *testutil.EtcdCluster) (*testutil.EtcdMember, error) {
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for _, m := range c.Members {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := cl.Status(ctx, m.ClientAddr)
		cancel()
		if err == nil && st.Header.MemberId == st.Leader {
			return m, nil
		}
	}
	return nil, errNoLeader
}

// pauseEtcdMember freezes m (SIGSTOP) for d, then continues it.
func pauseEtcdMember(m *testutil.EtcdMember, d time.Duration) {
	m.Pause()
	time.Sleep(d) // the pause's length is the fault
	m.Resume()
}
