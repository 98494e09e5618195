//go:build unix

package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestOptionsPrintNoSecret: Options printed with any verb that reaches
// Format, JSON-encoded or logged through zap show that a password is set
// (xxxxx), never the password.
func TestOptionsPrintNoSecret(t *testing.T) {
	const secret = "S3cr3tPW"
	testutil.CheckOptionsPrinted(t, "etcd.Options", secret, []testutil.PrintCase[Options]{
		{Name: "password", Options: Options{Endpoints: []string{"etcd.example:2379"}, Username: "app", Password: secret}, Show: []string{"etcd.example:2379", "Password:xxxxx", "app"}},
		{Name: "endpoint with user info", Options: Options{Endpoints: []string{"https://app:" + secret + "@etcd.example:2379", "b.example:2379"}}, Show: []string{"xxxxx", "b.example:2379"}},
	})
}

// TestFactoryErrors: bad configuration is refused at New, naming the full
// key path, wrapping ErrOptions, without the password.
func TestFactoryErrors(t *testing.T) {
	const path = "mutex.orders.driver"
	const secret = "S3cr3tPW"
	for _, tc := range []struct {
		name    string
		options map[string]any
		client  any
		want    string
		wraps   bool // wraps ErrOptions
	}{
		{name: "no endpoints", options: map[string]any{}, want: path + ".endpoints: is required", wraps: true},
		{name: "empty endpoint", options: map[string]any{"endpoints": []any{"a:1", " "}}, want: path + ".endpoints: has an empty address", wraps: true},
		{name: "credentials in an endpoint", options: map[string]any{"endpoints": []any{"http://u:" + secret + "@a:1"}}, want: path + ".endpoints: an endpoint holds an @", wraps: true},
		{name: "unknown key", options: map[string]any{"endpoints": []any{"a:1"}, "prefix": "x"}, want: path + ".prefix: unknown key"},
		{name: "bad duration", options: map[string]any{"endpoints": []any{"a:1"}, "dialTimeout": "soon"}, want: path + ".dialTimeout: "},
		{name: "negative dial timeout", options: map[string]any{"endpoints": []any{"a:1"}, "dialTimeout": "-2s"}, want: path + ".dialTimeout: must not be negative", wraps: true},
		{name: "negative linger", options: map[string]any{"endpoints": []any{"a:1"}, "waiterLinger": "-2s"}, want: path + ".waiterLinger: must not be negative", wraps: true},
		{name: "password alone", options: map[string]any{"endpoints": []any{"a:1"}, "password": secret}, want: path + ".password: needs username", wraps: true},
		{name: "cert without key", options: map[string]any{"endpoints": []any{"a:1"}, "tlsCertFile": "/c.pem"}, want: path + ".tlsCertFile: set tlsCertFile and tlsKeyFile together", wraps: true},
		{name: "missing CA file", options: map[string]any{"endpoints": []any{"a:1"}, "tlsCAFile": "/nonexistent/ca.pem"}, want: path + ".tlsCAFile: ", wraps: true},
		{name: "client of another type", options: map[string]any{}, client: "x", want: path + ".client: is a string, not a *clientv3.Client"},
		{name: "client with endpoints", options: map[string]any{"endpoints": []any{"a:1"}}, client: &clientv3.Client{}, want: path + ".endpoints: cannot be set with client"},
		{name: "client with password", options: map[string]any{"password": secret}, client: &clientv3.Client{}, want: path + ".password: cannot be set with client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Factory().New(drivers.Spec{Path: path, Options: tc.options, Client: tc.client, Logger: zap.NewNop()})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v; want prefix %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error shows the password: %v", err)
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Errorf("error %v is not a *config.Error", err)
			}
			if tc.wraps && !errors.Is(err, ErrOptions) {
				t.Errorf("error %v does not wrap ErrOptions", err)
			}
		})
	}
}

// TestFactoryConnectsLazily: the factory builds a driver without
// connecting; its first call to an unreachable cluster fails after the dial
// timeout, and Close returns.
func TestFactoryConnectsLazily(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)) // nothing listens
	d, err := Factory().New(drivers.Spec{Path: "p", Logger: zap.NewNop(), Options: map[string]any{
		"endpoints": []any{addr}, "dialTimeout": "300ms", "keyPrefix": "app/locks/",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if f := drivers.FeaturesOf(d); !f.Expiring || !f.ServerTime || !f.Fencing || !f.BlockingWait || f.Scope != "cluster" {
		t.Errorf("features %+v", f)
	}
	start := time.Now()
	_, err = d.Acquire(t.Context(), drivers.AcquireRequest{Key: "k", Token: "t", TTL: time.Second})
	if err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("Acquire on an unreachable cluster = %v after %v; want an error after about 300ms", err, time.Since(start))
	}
	if err := d.Close(t.Context()); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := d.Acquire(t.Context(), drivers.AcquireRequest{Key: "k", Token: "t", TTL: time.Second}); !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire after Close = %v; want ErrClosed", err)
	}
}

// TestWithClient: a driver on the application's client uses it and leaves
// it open; keys go under keyPrefix.
func TestWithClient(t *testing.T) {
	c := singleMember(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	d, err := Factory().New(drivers.Spec{Path: "p", Client: cli, Logger: zap.NewNop(), Options: map[string]any{"keyPrefix": "app/locks/"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "jobs/a b", Token: "t", TTL: time.Second})
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	got, err := cli.Get(ctx, "app/locks/jobs%2Fa%20b/", clientv3.WithPrefix())
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "t" || got.Kvs[0].CreateRevision != int64(res.Fence) {
		t.Fatalf("keys under the prefix: %v, %v; want one, valued t, created at the fence %d", got, err, res.Fence)
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Get(ctx, "x"); err != nil {
		t.Fatalf("the application's client after Close: %v", err)
	}
	if got, err := cli.Get(ctx, "app/locks/", clientv3.WithPrefix()); err != nil || len(got.Kvs) != 0 {
		t.Fatalf("keys after Close: %v, %v; want none (the driver's leases are revoked)", got, err)
	}
}
