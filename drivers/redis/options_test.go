package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

const secret = "s3cr3t-Pa55"

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"nothing", Options{}, "url or addrs is required"},
		{"both", Options{URL: "redis://h", Addrs: []string{"h:1"}}, "not both"},
		{"scheme", Options{URL: "http://u:" + secret + "@h:1"}, `scheme must be redis or rediss, not "http"`},
		{"bad port", Options{URL: "redis://u:" + secret + "@h:port/0"}, "url: invalid port"},
		{"bad db", Options{URL: "redis://u:" + secret + "@h:1/abc"}, "invalid database number"},
		{"bad path", Options{URL: "redis://u:" + secret + "@h:1/0/1"}, "invalid URL path"},
		{"bad query", Options{URL: "redis://u:" + secret + "@h:1/0?colour=" + secret}, "url:"},
		{"bad cluster url", Options{URL: "redis://u:" + secret + "@h:x", Cluster: true}, "url:"},
		{"control char", Options{URL: "redis://u:" + secret + "@h\x7f:1"}, "url:"},
		{"empty addr", Options{Addrs: []string{" "}}, "addrs: has an empty address"},
		{"cluster and sentinel", Options{Addrs: []string{"h:1"}, Cluster: true, MasterName: "m"}, "exclude each other"},
		{"cluster db", Options{Addrs: []string{"h:1"}, Cluster: true, DB: 2}, "db: must be 0 in cluster mode"},
		{"negative db", Options{Addrs: []string{"h:1"}, DB: -1}, "db: must not be negative"},
		{"negative timeout", Options{Addrs: []string{"h:1"}, DialTimeout: -1}, "must not be negative"},
		{"sentinel password without sentinel", Options{Addrs: []string{"h:1"}, SentinelPassword: secret}, "need masterName"},
		{"missing CA", Options{Addrs: []string{"h:1"}, TLSCAFile: "/nonexistent/ca.pem"}, "tlsCAFile:"},
		{"renew batch", Options{Addrs: []string{"h:1"}, RenewBatch: -1}, "renewBatch: must be positive"},
		{"fence ttl", Options{Addrs: []string{"h:1"}, FenceTTL: time.Microsecond}, "fenceTTL: must be at least 1ms"},
		{"restart wait", Options{Addrs: []string{"h:1"}, RestartWait: -time.Second}, "restartWait: must not be negative"},
		{"min replicas", Options{Addrs: []string{"h:1"}, MinReplicas: -2}, "minReplicas: must be -1 (none)"},
		{"replica timeout", Options{Addrs: []string{"h:1"}, ReplicaTimeout: time.Microsecond}, "replicaTimeout: must be at least 1ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := New(tt.opts)
			if err == nil {
				_ = d.Close(context.Background())
				t.Fatalf("New succeeded; want an error containing %q", tt.want)
			}
			if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q; want ErrOptions containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error %q contains the password", err)
			}
		})
	}
}

func TestNewAcceptsGoodOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		addr string
		tls  bool
		db   int
	}{
		{"url", Options{URL: "redis://u:" + secret + "@h:7000/3"}, "h:7000", false, 3},
		{"rediss", Options{URL: "rediss://h"}, "h:6379", true, 0},
		{"addrs tls", Options{Addrs: []string{"h:1"}, TLS: true, DB: 1}, "h:1", true, 1},
		{"cluster url", Options{URL: "redis://h:1?addr=h:2", Cluster: true}, "h:1", false, 0},
		{"sentinel", Options{Addrs: []string{"s:26379"}, MasterName: "mymaster"}, "s:26379", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := tt.opts.universal()
			if err != nil {
				t.Fatal(err)
			}
			if u.Addrs[0] != tt.addr || (u.TLSConfig != nil) != tt.tls || u.DB != tt.db {
				t.Fatalf("options %+v: addrs %v tls %v db %d", tt.opts, u.Addrs, u.TLSConfig != nil, u.DB)
			}
			if u.DialTimeout != DefaultDialTimeout || u.DialerRetries != 1 || u.MaxRetries != -1 || !u.ContextTimeoutEnabled {
				t.Fatalf("defaults not applied: %+v", u)
			}
			d, err := New(tt.opts) // connects nothing: the hosts do not exist
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestURLPasswordNeverShown: a password holding / ? # unescaped breaks
// the URL (the host part ends inside it, so the parser takes pieces of it
// for the port, path, query or fragment), as does a bad % escape; the
// error shows none of it, nor anything of the URL, and says to
// percent-encode. Escaped, or with only @, the URL is valid and the
// password is read whole.
func TestURLPasswordNeverShown(t *testing.T) {
	const head, tail = "Hd7q", "Tl3x" // the password's pieces around the special character
	for _, sep := range []string{"/", "?", "#", "@/", "/@", "%zz", "12/", "12?", "12#"} {
		pw := head + sep + tail
		if strings.HasPrefix(sep, "12") {
			pw = "12" + sep[2:] + tail // a port-like start: url.Parse accepts the URL
		}
		for _, cluster := range []bool{false, true} {
			t.Run(fmt.Sprintf("%q cluster=%v", pw, cluster), func(t *testing.T) {
				d, err := New(Options{URL: "redis://Usr8k:" + pw + "@hst5z:6379/0", Cluster: cluster})
				if err == nil {
					_ = d.Close(context.Background())
					t.Fatal("New accepted the URL")
				}
				msg := err.Error()
				for _, part := range []string{head, tail, "12", "%zz", "Usr8k", "hst5z", "6379"} {
					if strings.Contains(msg, part) {
						t.Fatalf("error %q shows %q of the URL", msg, part)
					}
				}
				if !errors.Is(err, ErrOptions) || !strings.Contains(msg, "url: ") || !strings.Contains(msg, "percent-encode") {
					t.Fatalf("error %q; want ErrOptions on the url, saying to percent-encode", msg)
				}
			})
		}
		t.Run(fmt.Sprintf("%q escaped", pw), func(t *testing.T) {
			u, err := Options{URL: "redis://" + url.UserPassword("user", pw).String() + "@host:6379/0"}.universal()
			if err != nil || u.Password != pw || u.Addrs[0] != "host:6379" {
				t.Fatalf("escaped: %v, %+v", err, u)
			}
		})
	}
	u, err := Options{URL: "redis://user:" + head + "@" + tail + "@host:6379/0"}.universal()
	if err != nil || u.Password != head+"@"+tail || u.Addrs[0] != "host:6379" {
		t.Fatalf("a password with an unescaped @ only: %v, %+v", err, u)
	}
}

// TestURLPiecesNeverShown: URLs whose password ends the host part early
// where the part before the password's / ? or # still parses (as a port,
// or as nothing), or that lack the "//", are refused by New and the
// factory, before any dial, with an error showing none of the pieces
// (password, user, host, the parameters the password's tail would be).
func TestURLPiecesNeverShown(t *testing.T) {
	tests := []struct {
		name   string
		url    string
		pieces []string // none may appear in the error
	}{
		// was "unexpected option: Qw"
		{"? after a port-like start", "redis://user:83?Qw=T9k@host", []string{"83", "Qw", "T9k"}},
		// was accepted, then dialled 127.0.0.1:4411
		{"? after a port-like password", "redis://:4411?client_name=Zq@127.0.0.1:1", []string{"4411", "Zq", "127.0.0.1"}},
		{"? with a known parameter", "redis://:Pw9?pool_size=3@hst5z:6379", []string{"Pw9", "pool_size", "hst5z"}},
		{"? then &", "redis://u:Pw9?client_name=Kv&x=Yb@hst5z/0", []string{"Pw9", "Kv", "Yb", "hst5z"}},
		{"# after a port-like start", "redis://:4411#Zq7@hst5z:6379", []string{"4411", "Zq7", "hst5z"}},
		{"/ after a port-like start", "redis://:4411/Zq7@hst5z:6379", []string{"4411", "Zq7", "hst5z"}},
		{"@ in the user and ? in the password", "redis://Usr8k@Grp2:12?a=Qw7@hst5z", []string{"Usr8k", "Grp2", "12", "Qw7", "hst5z"}},
		{"no //", "redis:Usr8k:Pw9x@hst5z:6379", []string{"Usr8k", "Pw9x", "hst5z"}},
		{"no scheme", "Usr8k:Pw9x@hst5z:6379", []string{"Usr8k", "Pw9x", "hst5z"}},
		{"@ in a query value", "redis://hst5z:6379/0?client_name=Kv@Yb", []string{"hst5z", "Kv", "Yb"}},
	}
	for _, tt := range tests {
		for _, cluster := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s cluster=%v", tt.name, cluster), func(t *testing.T) {
				d, err := New(Options{URL: tt.url, Cluster: cluster})
				if err == nil {
					_ = d.Close(context.Background())
					t.Fatal("New accepted the URL")
				}
				if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "url: ") {
					t.Fatalf("error %q; want ErrOptions on the url", err)
				}
				_, ferr := Factory().New(drivers.Spec{Path: "mutex.orders.driver", Logger: zap.NewNop(),
					Options: map[string]any{"url": tt.url, "cluster": cluster}})
				var ce *config.Error
				if ferr == nil || !strings.HasPrefix(ferr.Error(), "mutex.orders.driver.url: ") || !errors.Is(ferr, ErrOptions) || !errors.As(ferr, &ce) {
					t.Fatalf("factory error %v; want a config error at mutex.orders.driver.url wrapping ErrOptions", ferr)
				}
				for _, msg := range []string{err.Error(), ferr.Error()} {
					for _, p := range tt.pieces {
						if strings.Contains(msg, p) {
							t.Fatalf("error %q shows %q of the URL", msg, p)
						}
					}
				}
			})
		}
	}
}

// TestURLAtInQueryValue: an @ in a query value must be percent-encoded
// (a raw one is refused above, as it could be a misplaced password); so
// encoded, it reaches go-redis decoded.
func TestURLAtInQueryValue(t *testing.T) {
	u, err := Options{URL: "redis://127.0.0.1:6379/0?client_name=billing%40eu-west"}.universal()
	if err != nil || u.Addrs[0] != "127.0.0.1:6379" || u.ClientName != "billing@eu-west" {
		t.Fatalf("URL with an encoded @ in a query value: %v, %+v", err, u)
	}
}

func TestFactory(t *testing.T) {
	tests := []struct {
		name    string
		options map[string]any
		client  any
		want    string // error substring; "" for success
	}{
		{"unknown key", map[string]any{"adress": "h:1"}, nil, "mutex.orders.driver.adress: unknown key"},
		{"bad duration", map[string]any{"addrs": []any{"h:1"}, "dialTimeout": "soon"}, nil, "mutex.orders.driver.dialTimeout"},
		{"bad url", map[string]any{"url": "redis://u:" + secret + "@h:port"}, nil, "mutex.orders.driver.url: invalid port"},
		{"missing", map[string]any{}, nil, "mutex.orders.driver: url or addrs is required"},
		{"url", map[string]any{"url": "redis://h:1/2", "dialTimeout": 250}, nil, ""},
		{"client", map[string]any{"channel": "c"}, goredis.NewClient(&goredis.Options{Addr: "h:1"}), ""},
		{"client with url", map[string]any{"url": "redis://h"}, goredis.NewClient(&goredis.Options{Addr: "h:1"}), "mutex.orders.driver.url: cannot be set with client"},
		{"wrong client", map[string]any{}, "not a client", "mutex.orders.driver.client: is a string"},
	}
	f := Factory()
	if f.Type != "redis" || f.ClientType.String() != "redis.UniversalClient" || drivers.PackageOf(f.Type) == "" {
		t.Fatalf("factory %+v", f)
	}
	for _, tt := range tests {
		if c, ok := tt.client.(*goredis.Client); ok {
			t.Cleanup(func() { c.Close() }) // closed even when -run skips its subtest
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := f.New(drivers.Spec{Path: "mutex.orders.driver", Options: tt.options, Client: tt.client, Logger: zap.NewNop()})
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				_ = d.Close(context.Background())
				return
			}
			if err == nil {
				_ = d.Close(context.Background())
				t.Fatalf("no error; want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), secret) {
				t.Fatalf("error %q; want %q and no password", err, tt.want)
			}
		})
	}
}

// TestNewWithClientDoesNotCloseIt: the application's client survives the
// driver.
func TestNewWithClientDoesNotCloseIt(t *testing.T) {
	c := goredis.NewClient(&goredis.Options{Addr: testutil.RedisAddr()})
	defer c.Close()
	d, err := NewWithClient(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "redistest:" + t.Name(), Token: "t", TTL: time.Second})
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	if _, err := d.Release(ctx, "redistest:"+t.Name(), "t"); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("client closed by the driver: %v", err)
	}
	if _, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "t", TTL: time.Second}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire after Close = %v; want ErrClosed", err)
	}
}

// TestUnreachable: the constructor connects nothing; the first call fails
// with a clear error (ErrDriver through the component) after at most the
// dial timeout, and the calls during the reconnection fail at once.
func TestUnreachable(t *testing.T) {
	// A listener that never accepts: connects hang in the backlog or dial
	// completes and the handshake gets no answer.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tests := []struct {
		name  string
		addr  string
		dial  time.Duration
		bound time.Duration
	}{
		{"refused", "127.0.0.1:" + itoa(testutil.FreePort(t)), 0, time.Second},
		{"silent", ln.Addr().String(), 300 * time.Millisecond, 4 * time.Second},
		// connects time out: go-redis then reports an error that also
		// matches context.DeadlineExceeded while the caller's context is
		// live; it must still count as the server being unreachable
		{"blackholed", blackhole(t), 300 * time.Millisecond, 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := New(Options{Addrs: []string{tt.addr}, DialTimeout: tt.dial, Password: secret})
			if err != nil {
				t.Fatalf("New connected or failed: %v", err)
			}
			m, err := component.New(component.Options{Driver: d, Prefix: "redistest:", TTL: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			start := time.Now()
			_, err = m.Acquire(context.Background(), "unreachable", component.WithTimeout(component.NoWait))
			first := time.Since(start)
			if !errors.Is(err, component.ErrDriver) {
				t.Fatalf("first Acquire = %v; want ErrDriver", err)
			}
			if first > tt.bound || strings.Contains(err.Error(), secret) {
				t.Fatalf("first Acquire failed after %v (bound %v): %v", first, tt.bound, err)
			}
			// A call with no deadline of its own is bounded by the dial and
			// command timeouts (5 s and 3 s by default).
			start = time.Now()
			_, err = d.Acquire(context.Background(), drivers.AcquireRequest{Key: "k", Token: "t", TTL: time.Second})
			if err == nil || time.Since(start) > DefaultDialTimeout+time.Second {
				t.Fatalf("call without deadline = %v after %v", err, time.Since(start))
			}
			start = time.Now()
			_, err = d.Acquire(context.Background(), drivers.AcquireRequest{Key: "k", Token: "t", TTL: time.Second})
			if !errors.Is(err, ErrUnavailable) || time.Since(start) > 50*time.Millisecond {
				t.Fatalf("call while reconnecting = %v after %v; want ErrUnavailable at once", err, time.Since(start))
			}
			t.Logf("first call failed after %v: %v", first.Round(time.Millisecond), err)
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// blackhole returns the address of a listener whose accept queue is full,
// so that connecting to it hangs until the dial times out (the kernel drops
// the SYNs). It is closed at the end of the test.
func blackhole(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.CloseOnExec(fd) // (SOCK_CLOEXEC is Linux's: the module is vetted for darwin and windows too)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", itoa(sa.(*syscall.SockaddrInet4).Port))
	// Fill the queue (length backlog + 1), then check that a connect hangs.
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("blackhole: dial: %v", err)
			}
			return addr
		}
		t.Cleanup(func() { _ = c.Close() })
	}
}
