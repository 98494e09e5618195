//go:build unix

package etcd

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestAuthPrefixRole: with etcd authentication on, a user whose only role
// is readwrite on the keyPrefix range acquires, renews, inspects, waits for
// and releases locks, and its driver's Close revokes its leases; a wrong
// password fails the first call without showing the password.
func TestAuthPrefixRole(t *testing.T) {
	c := authCluster(t)
	ctx := t.Context()

	d := open(t, Options{Endpoints: c.Endpoints(), Username: "app", Password: "S3cr3tPW", KeyPrefix: "app/"})
	other := open(t, Options{Endpoints: c.Endpoints(), Username: "app", Password: "S3cr3tPW", KeyPrefix: "app/"})
	// A 10 s ttl: nothing renews the lock while the test waits for the
	// queue, which takes seconds on a loaded machine.
	res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "a", TTL: 10 * time.Second})
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	if r := d.Renew(ctx, []drivers.Lease{{Key: "k", Token: "a", TTL: 10 * time.Second}}); r[0].Err != nil || !r[0].Held {
		t.Fatalf("Renew = %+v", r)
	}
	if info, ok, err := other.Inspect(ctx, "k"); err != nil || !ok || info.Token != "a" {
		t.Fatalf("Inspect = %+v, %v, %v", info, ok, err)
	}
	waited := make(chan drivers.AcquireResult, 1)
	go func() {
		r, err := other.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "b", TTL: time.Second, Wait: 15 * time.Second})
		if err != nil {
			t.Errorf("waiting Acquire: %v", err)
		}
		waited <- r
	}()
	testutil.Poll(t, 10*time.Second, "two waiters queued", func() bool { n, _ := d.queueLen(ctx, "k"); return n == 2 })
	if ok, err := d.Release(ctx, "k", "a"); !ok || err != nil {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	if r := <-waited; !r.Acquired || r.Fence <= res.Fence {
		t.Fatalf("waiter got %+v after fence %d", r, res.Fence)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := other.Close(cctx); err != nil {
		t.Fatalf("Close (revoking the leases) = %v", err)
	}

	bad := open(t, Options{Endpoints: c.Endpoints(), Username: "app", Password: "Wr0ngPW", KeyPrefix: "app/"})
	_, err = bad.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "c", TTL: time.Second})
	if err == nil || strings.Contains(err.Error(), "Wr0ngPW") {
		t.Fatalf("Acquire with a wrong password = %v; want an error without the password", err)
	}
}

// queueLen returns how many keys key's queue has.
func (d *Driver) queueLen(ctx context.Context, key string) (int64, error) {
	cli, err := d.Client(ctx)
	if err != nil {
		return 0, err
	}
	resp, err := cli.Get(ctx, d.queue(key), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}

// authCluster starts a single member with authentication on: users root
// (password rootpw) and app (S3cr3tPW), whose only role, locks, may read
// and write the keys under "app/".
func authCluster(t *testing.T) *testutil.EtcdCluster {
	t.Helper()
	c := singleMember(t)
	ctx := t.Context()
	root, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { _, err := root.RoleAdd(ctx, "root"); return err },
		func() error { _, err := root.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.RoleAdd(ctx, "locks"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "locks", "app/", clientv3.GetPrefixRangeEnd("app/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "app", "S3cr3tPW"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "app", "locks"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	_ = root.Close()
	return c
}
