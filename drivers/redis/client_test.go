package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// wrapper is an application's own UniversalClient: the driver cannot tell
// what it talks to.
type wrapper struct{ goredis.UniversalClient }

// TestClientKinds: NewWithClient and the factory's driver.client take a
// *redis.Client (scope server) or a *redis.ClusterClient (scope cluster),
// whose renewals then confirm every lock held. A Ring over two real
// servers, an AutoPipeliner over a real Cluster client or a Client, any
// other wrapper and nil pointers are refused at construction, the error
// naming the client's kind and what to pass instead.
func TestClientKinds(t *testing.T) {
	cluster := testutil.StartRedisCluster(t)
	knownCluster(t, cluster)
	shards := []*testutil.RedisServer{testutil.StartRedis(t), testutil.StartRedis(t)}
	ctx := t.Context()

	single := goredis.NewClient(&goredis.Options{Addr: testutil.RedisAddr(), ContextTimeoutEnabled: true})
	defer single.Close()
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs, ContextTimeoutEnabled: true})
	defer cc.Close()
	ring := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": shards[0].Addr, "b": shards[1].Addr}})
	defer ring.Close()
	clusterAP, err := cc.AutoPipeline()
	if err != nil {
		t.Fatalf("AutoPipeline over the Cluster client: %v", err)
	}
	defer clusterAP.Close()
	singleAP, err := single.AutoPipeline()
	if err != nil {
		t.Fatalf("AutoPipeline over the Client: %v", err)
	}
	defer singleAP.Close()
	// The clients are real: each answers (the Ring through both shards).
	for name, c := range map[string]goredis.UniversalClient{"client": single, "cluster": cc, "cluster autopipeliner": clusterAP} {
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("%s: PING: %v", name, err)
		}
	}
	if err := ring.ForEachShard(ctx, func(ctx context.Context, s *goredis.Client) error { return s.Ping(ctx).Err() }); err != nil {
		t.Fatalf("ring: PING: %v", err)
	}

	t.Run("Accepted", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			client goredis.UniversalClient
			scope  string
		}{
			{"client", single, "server"},
			{"cluster", cc, "cluster"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				d, err := NewWithClient(tt.client, Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close(context.Background())
				if got := d.Features().Scope; got != tt.scope {
					t.Fatalf("scope %q; want %q", got, tt.scope)
				}
				renewAll(t, d, 20)
			})
		}
	})

	refused := []struct {
		name   string
		client goredis.UniversalClient
		want   string
	}{
		{"ring", ring, "a *redis.Ring is not supported"},
		{"autopipeliner over a cluster client", clusterAP, "pass the *redis.Client or *redis.ClusterClient it wraps"},
		{"autopipeliner over a client", singleAP, "a *redis.AutoPipeliner is not supported"},
		{"wrapper", wrapper{single}, "a redis.wrapper is not supported"},
		{"nil client pointer", (*goredis.Client)(nil), "nil client"},
		{"nil cluster client pointer", (*goredis.ClusterClient)(nil), "nil client"},
		{"nil", nil, "nil client"},
	}
	t.Run("NewWithClient", func(t *testing.T) {
		for _, tt := range refused {
			t.Run(tt.name, func(t *testing.T) {
				d, err := NewWithClient(tt.client, Options{})
				if err == nil {
					_ = d.Close(context.Background())
					t.Fatal("NewWithClient accepted the client")
				}
				if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %q; want ErrOptions containing %q", err, tt.want)
				}
			})
		}
	})
	t.Run("Factory", func(t *testing.T) {
		for _, tt := range refused[:4] {
			t.Run(tt.name, func(t *testing.T) {
				d, err := Factory().New(drivers.Spec{Path: "mutex.orders.driver", Options: map[string]any{}, Client: tt.client, Logger: zap.NewNop()})
				if err == nil {
					_ = d.Close(context.Background())
					t.Fatal("the factory accepted the client")
				}
				if !strings.HasPrefix(err.Error(), "mutex.orders.driver.client: ") || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %q; want it at mutex.orders.driver.client, containing %q", err, tt.want)
				}
			})
		}
	})
	// The application's clients are still open: the refusals closed nothing.
	for name, c := range map[string]goredis.UniversalClient{"client": single, "cluster": cc, "ring": ring} {
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("%s after the refusals: %v", name, err)
		}
	}
}

// renewAll acquires n locks with d, spread over many Cluster slots,
// renews them in one call and checks every one is reported held, then
// releases them.
func renewAll(t *testing.T, d *Driver, n int) {
	t.Helper()
	ctx := t.Context()
	var leases []drivers.Lease
	for i := range n {
		l := drivers.Lease{Key: "redistest:" + t.Name() + ":" + strconv.Itoa(i), Token: "t" + strconv.Itoa(i), TTL: 5 * time.Second}
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: l.Key, Token: l.Token, TTL: time.Second}); err != nil || !res.Acquired {
			t.Fatalf("Acquire %s = %+v, %v", l.Key, res, err)
		}
		leases = append(leases, l)
	}
	for i, r := range d.Renew(ctx, leases) {
		if r.Err != nil || !r.Held {
			t.Fatalf("Renew of lease %d = %+v; want held", i, r)
		}
	}
	for _, l := range leases {
		if ok, err := d.Release(ctx, l.Key, l.Token); err != nil || !ok {
			t.Fatalf("Release %s = %v, %v", l.Key, ok, err)
		}
	}
}
