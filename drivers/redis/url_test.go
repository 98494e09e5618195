package redis

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// clientOptions returns the options of d's go-redis client after go-redis
// applied its own defaults: what the client runs with.
func clientOptions(t *testing.T, d *Driver) any {
	t.Helper()
	switch c := d.Client().(type) {
	case *goredis.Client:
		return c.Options()
	case *goredis.ClusterClient:
		return c.Options()
	}
	t.Fatalf("client %T", d.Client())
	return nil
}

// field returns the value at a dotted path of fields of *opts.
func field(t *testing.T, opts any, path string) any {
	t.Helper()
	v := reflect.ValueOf(opts)
	for _, name := range strings.Split(path, ".") {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				t.Fatalf("%s: nil before %s", path, name)
			}
			v = v.Elem()
		}
		v = v.FieldByName(name)
		if !v.IsValid() {
			t.Fatalf("no field %s in %s", name, path)
		}
	}
	return v.Interface()
}

// TestURLOptionsApplied: every query parameter go-redis parses reaches the
// client, Options' fields win over the URL's parameters, which win over the
// driver's defaults, which win over go-redis's (checked on the options the
// go-redis client runs with, after its own defaults).
func TestURLOptionsApplied(t *testing.T) {
	defaultPool := 10 * runtime.GOMAXPROCS(0)
	tests := []struct {
		name string
		opts Options
		want map[string]any
	}{
		{"driver defaults", Options{URL: "redis://h:1"}, map[string]any{
			"DialTimeout": DefaultDialTimeout, "DialerRetries": 1, "ReadTimeout": DefaultCommandTimeout,
			"WriteTimeout": DefaultCommandTimeout, "MaxRetries": 0, "PoolSize": defaultPool,
			"ContextTimeoutEnabled": true, "DisableIdentity": true, "ClientName": "", "Protocol": 3,
		}},
		{"every standalone parameter", Options{URL: "redis://h:1?db=3&client_name=orders&protocol=2&max_retries=2" +
			"&min_retry_backoff=5ms&max_retry_backoff=50ms&dial_timeout=2s&read_timeout=4s&write_timeout=6s" +
			"&pool_fifo=true&pool_size=7&pool_timeout=9s&min_idle_conns=1&max_idle_conns=3&max_active_conns=20" +
			"&max_concurrent_dials=2&conn_max_idle_time=1m&conn_max_lifetime=1h&conn_max_lifetime_jitter=1m" +
			"&pipeline_pool_size=4&pipeline_read_buffer_size=65536&pipeline_write_buffer_size=32768"}, map[string]any{
			"Addr": "h:1", "DB": 3, "ClientName": "orders", "Protocol": 2, "MaxRetries": 2,
			"MinRetryBackoff": 5 * time.Millisecond, "MaxRetryBackoff": 50 * time.Millisecond,
			"DialTimeout": 2 * time.Second, "DialerRetries": 1, "ReadTimeout": 4 * time.Second, "WriteTimeout": 6 * time.Second,
			"PoolFIFO": true, "PoolSize": 7, "PoolTimeout": 9 * time.Second, "MinIdleConns": 1, "MaxIdleConns": 3,
			"MaxActiveConns": 20, "MaxConcurrentDials": 2, "ConnMaxIdleTime": time.Minute, "ConnMaxLifetime": time.Hour,
			"ConnMaxLifetimeJitter": time.Minute, "PipelinePoolSize": 4, "PipelineReadBufferSize": 65536,
			"PipelineWriteBufferSize": 32768, "ContextTimeoutEnabled": true,
		}},
		{"fields win over parameters", Options{URL: "redis://u:p@h:1/3?dial_timeout=7s&read_timeout=8s&write_timeout=9s" +
			"&pool_size=7&max_retries=4", Username: "v", Password: "q", DB: 5, DialTimeout: time.Second,
			CommandTimeout: 2 * time.Second, PoolSize: 3, MaxRetries: 1}, map[string]any{
			"Username": "v", "Password": "q", "DB": 5, "DialTimeout": time.Second, "ReadTimeout": 2 * time.Second,
			"WriteTimeout": 2 * time.Second, "PoolSize": 3, "MaxRetries": 1,
		}},
		{"URL user and database", Options{URL: "redis://u:p@h:1/3"}, map[string]any{"Username": "u", "Password": "p", "DB": 3}},
		// go-redis: -1 (or 0) disables the socket timeout (0 in the client)
		{"read_timeout=-1", Options{URL: "redis://h:1?read_timeout=-1"}, map[string]any{"ReadTimeout": time.Duration(0), "WriteTimeout": time.Duration(0)}},
		{"read_timeout=0", Options{URL: "redis://h:1?read_timeout=0"}, map[string]any{"ReadTimeout": time.Duration(0), "WriteTimeout": time.Duration(0)}},
		{"write follows read", Options{URL: "redis://h:1?read_timeout=5s"}, map[string]any{"ReadTimeout": 5 * time.Second, "WriteTimeout": 5 * time.Second}},
		{"write alone", Options{URL: "redis://h:1?write_timeout=5s"}, map[string]any{"ReadTimeout": DefaultCommandTimeout, "WriteTimeout": 5 * time.Second}},
		{"commandTimeout over disabled", Options{URL: "redis://h:1?read_timeout=-1", CommandTimeout: time.Second}, map[string]any{"ReadTimeout": time.Second, "WriteTimeout": time.Second}},
		{"max_retries=0 is none", Options{URL: "redis://h:1?max_retries=0"}, map[string]any{"MaxRetries": 0}},
		{"max_retries=-1 is none", Options{URL: "redis://h:1?max_retries=-1"}, map[string]any{"MaxRetries": 0}},
		{"skip_verify kept", Options{URL: "rediss://h:1?skip_verify=true"}, map[string]any{"TLSConfig.InsecureSkipVerify": true, "TLSConfig.ServerName": "h"}},
		{"skip_verify=false kept", Options{URL: "rediss://h:1?skip_verify=false"}, map[string]any{"TLSConfig.InsecureSkipVerify": false}},
		{"tlsInsecureSkipVerify over skip_verify", Options{URL: "rediss://h:1?skip_verify=false", TLSInsecureSkipVerify: true}, map[string]any{"TLSConfig.InsecureSkipVerify": true}},
		{"tlsServerName over the host", Options{URL: "rediss://h:1", TLSServerName: "db.example"}, map[string]any{"TLSConfig.ServerName": "db.example", "TLSConfig.MinVersion": uint16(0x0303)}},
		{"every cluster parameter", Options{Cluster: true, URL: "redis://u:p@h:1?addr=h:2&addr=h:3&client_name=orders" +
			"&protocol=2&max_redirects=5&read_only=true&route_by_latency=true&route_by_latency_tolerance=3ms" +
			"&route_randomly=true&max_retries=2&min_retry_backoff=5ms&max_retry_backoff=50ms&dial_timeout=2s" +
			"&dialer_retries=3&dialer_retry_timeout=40ms&read_timeout=4s&write_timeout=6s&pool_fifo=true&pool_size=7" +
			"&max_concurrent_dials=2&min_idle_conns=1&max_idle_conns=3&max_active_conns=20&pipeline_pool_size=4" +
			"&pipeline_read_buffer_size=65536&pipeline_write_buffer_size=32768&pool_timeout=9s&conn_max_lifetime=1h" +
			"&conn_max_lifetime_jitter=1m&conn_max_idle_time=1m&failing_timeout_seconds=7"}, map[string]any{
			"Addrs": []string{"h:1", "h:2", "h:3"}, "Username": "u", "Password": "p", "ClientName": "orders",
			"Protocol": 2, "MaxRedirects": 5, "ReadOnly": true, "RouteByLatency": true,
			"RouteByLatencyTolerance": 3 * time.Millisecond, "RouteRandomly": true, "MaxRetries": 2,
			"MinRetryBackoff": 5 * time.Millisecond, "MaxRetryBackoff": 50 * time.Millisecond,
			"DialTimeout": 2 * time.Second, "DialerRetries": 3, "DialerRetryTimeout": 40 * time.Millisecond,
			"ReadTimeout": 4 * time.Second, "WriteTimeout": 6 * time.Second, "PoolFIFO": true, "PoolSize": 7,
			"MaxConcurrentDials": 2, "MinIdleConns": 1, "MaxIdleConns": 3, "MaxActiveConns": 20,
			"PipelinePoolSize": 4, "PipelineReadBufferSize": 65536, "PipelineWriteBufferSize": 32768,
			"PoolTimeout": 9 * time.Second, "ConnMaxLifetime": time.Hour, "ConnMaxLifetimeJitter": time.Minute,
			"ConnMaxIdleTime": time.Minute, "FailingTimeoutSeconds": 7, "ContextTimeoutEnabled": true,
		}},
		{"cluster defaults", Options{Cluster: true, URL: "redis://h:1/0"}, map[string]any{
			"DialTimeout": DefaultDialTimeout, "DialerRetries": 1, "ReadTimeout": DefaultCommandTimeout,
			"WriteTimeout": DefaultCommandTimeout, "MaxRetries": -1,
		}},
		{"cluster fields win", Options{Cluster: true, URL: "redis://h:1?max_retries=4&read_timeout=-1&pool_size=7",
			MaxRetries: 1, CommandTimeout: time.Second, PoolSize: 2}, map[string]any{
			"MaxRetries": 1, "ReadTimeout": time.Second, "WriteTimeout": time.Second, "PoolSize": 2,
		}},
		{"cluster rediss", Options{Cluster: true, URL: "rediss://h:1"}, map[string]any{"TLSConfig.ServerName": "h", "TLSConfig.MinVersion": uint16(0x0303)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := New(tt.opts) // connects nothing
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close(context.Background())
			opts := clientOptions(t, d)
			for path, want := range tt.want {
				if got := field(t, opts, path); !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %v; want %v", path, got, want)
				}
			}
		})
	}
}

// TestURLOptionsRefused: URL settings the driver cannot honour are errors
// naming them, never dropped.
func TestURLOptionsRefused(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"dial_timeout=0", Options{URL: "redis://h:1?dial_timeout=0"}, "url: dial_timeout must be positive"},
		{"dial_timeout=-1", Options{URL: "redis://h:1?dial_timeout=-1", Cluster: true}, "url: dial_timeout must be positive"},
		{"cluster database", Options{URL: "redis://h:1/3", Cluster: true}, "url: the database must be 0 in cluster mode"},
		{"unknown parameter", Options{URL: "redis://h:1?colour=blue"}, "unexpected option: colour"},
		{"cluster-only parameter", Options{URL: "redis://h:1?read_only=true"}, "unexpected option: read_only"},
		{"skip_verify in cluster mode", Options{URL: "rediss://h:1?skip_verify=true", Cluster: true}, "unexpected option: skip_verify"},
		{"bad value", Options{URL: "redis://h:1?pool_size=many"}, "invalid pool_size number"},
		// a password with an unescaped & in the query: its tail reads as
		// a parameter's name, which is not shown
		{"password's tail", Options{URL: "redis://h:1/0?password=Zq7&k9W"}, "names are withheld"},
		{"password's tail, cluster", Options{URL: "redis://h:1?Password=Zq7&k9W", Cluster: true}, "names are withheld"},
		{"several addrs, no mode", Options{Addrs: []string{"h:1", "h:2"}}, "addrs: several addresses need cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := New(tt.opts)
			if err == nil {
				_ = d.Close(context.Background())
				t.Fatalf("New accepted the options; want %q", tt.want)
			}
			if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q; want ErrOptions containing %q", err, tt.want)
			}
			if msg := err.Error(); strings.Contains(msg, "Zq7") || strings.Contains(msg, "k9W") {
				t.Fatalf("error %q shows a piece of the password", msg)
			}
		})
	}
}

// TestCopyParsedReportsLost: a setting the URL parser fills that the
// driver's client options have no field for is reported, not dropped
// (guards a go-redis upgrade that adds a parameter).
func TestCopyParsedReportsLost(t *testing.T) {
	src := &struct {
		ClientName string
		Addr       string
		Shiny      int
		PoolSize   string // same name, another type
		Unset      int
		hidden     int
	}{ClientName: "orders", Addr: "h:1", Shiny: 2, PoolSize: "7", hidden: 1}
	u := &goredis.UniversalOptions{}
	lost := copyParsed(u, src, "Addr")
	if !reflect.DeepEqual(lost, []string{"Shiny", "PoolSize"}) || u.ClientName != "orders" || u.PoolSize != 0 {
		t.Fatalf("lost %v, options %+v", lost, u)
	}
}

// TestURLClientName: client_name from the URL names the driver's
// connections on a real server (go-redis's HELLO ... SETNAME).
func TestURLClientName(t *testing.T) {
	d := standalone(t, Options{URL: "redis://" + testutil.RedisAddr() + "/0?client_name=mutexfx-url-test"})
	ctx := t.Context()
	key := "redistest:" + t.Name()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "t", TTL: time.Second}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	if name, err := d.Client().ClientGetName(ctx).Result(); err != nil || name != "mutexfx-url-test" {
		t.Fatalf("CLIENT GETNAME = %q, %v", name, err)
	}
	if ok, err := d.Release(ctx, key, "t"); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
}

// TestShortPasswordNotMasked: a parser message that contains the password
// (here a one-letter one, found in go-redis's own words) is withheld, not
// masked occurrence by occurrence, which would show the letter.
func TestShortPasswordNotMasked(t *testing.T) {
	_, err := New(Options{URL: "redis://:p@127.0.0.1:6379?skip_verify=true", Cluster: true})
	if err == nil {
		t.Fatal("New accepted skip_verify on a plain cluster URL")
	}
	if msg := err.Error(); strings.Contains(msg, "xxxxx") || !strings.Contains(msg, "withheld") {
		t.Fatalf("error %q; want the parser's message withheld", msg)
	}
}
