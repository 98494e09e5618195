package etcd

import (
	"crypto/tls"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
	"github.com/mutexfx/mutexfx/internal/backoff"
)

// Defaults of Options.
const (
	// DefaultDialTimeout bounds the first connection to the cluster.
	DefaultDialTimeout = 5 * time.Second
	// DefaultKeyPrefix is the etcd key range under which the driver keeps
	// its lock queues (see Options.KeyPrefix).
	DefaultKeyPrefix = "mutexfx/"
	// DefaultWaiterLinger is how long a waiter's place in a lock's queue is
	// kept after an attempt that did not get the lock (see
	// Options.WaiterLinger).
	DefaultWaiterLinger = 250 * time.Millisecond
)

// ErrOptions reports invalid driver options. Errors wrapping it name the
// offending option; they never contain a password.
var ErrOptions = drivers.ErrOptions

// Options configure a Driver built by New. The configuration keys are the
// koanf tags.
type Options struct {
	// Endpoints are the cluster members' client addresses, "host:port" or
	// "http(s)://host:port". Required.
	Endpoints []string `koanf:"endpoints"`
	// Username authenticates (etcd's auth); it needs read and write
	// permission on the KeyPrefix range. Default: "" (no auth).
	Username string `koanf:"username"`
	// Password of Username; it never appears in errors or logs.
	// Default: "".
	Password string `koanf:"password"`
	// TLS enables TLS to the members. Implied by the other TLS options and
	// by https:// endpoints. Default: false.
	TLS bool `koanf:"tls"`
	// TLSCAFile is a PEM file of CA certificates trusted in place of the
	// system pool. Default: "" (system pool).
	TLSCAFile string `koanf:"tlsCAFile"`
	// TLSCertFile and TLSKeyFile are the client certificate and its key
	// (PEM), for clusters that authenticate clients by certificate.
	// Set both or neither. Default: "".
	TLSCertFile string `koanf:"tlsCertFile"`
	// TLSKeyFile: see TLSCertFile.
	TLSKeyFile string `koanf:"tlsKeyFile"`
	// TLSServerName overrides the name verified in the members'
	// certificates. Default: the endpoint's host.
	TLSServerName string `koanf:"tlsServerName"`
	// TLSInsecureSkipVerify disables certificate verification (testing
	// only). Default: false.
	TLSInsecureSkipVerify bool `koanf:"tlsInsecureSkipVerify"`
	// DialTimeout bounds the first connection to the cluster: an
	// unreachable cluster fails the first call after it.
	// Default: DefaultDialTimeout (5 s).
	DialTimeout time.Duration `koanf:"dialTimeout"`
	// KeyPrefix is prepended to every etcd key the driver writes: a lock
	// named N of a component with prefix P queues under
	// KeyPrefix + escaped(P+N) + "/". Components sharing locks must use the
	// same KeyPrefix. Default: DefaultKeyPrefix ("mutexfx/").
	KeyPrefix string `koanf:"keyPrefix"`
	// WaiterLinger is how long a waiter's key stays in a lock's queue after
	// an attempt that did not get the lock, so that the component's next
	// attempt (which follows at once) keeps the waiter's place; a waiter
	// that gave up delays the others by at most this.
	// Default: DefaultWaiterLinger (250 ms).
	WaiterLinger time.Duration `koanf:"waiterLinger"`
}

// settings are what the driver's operations need, whatever the client's
// origin.
type settings struct {
	prefix string
	linger time.Duration
}

func (o Options) settings() (settings, error) {
	s := settings{prefix: o.KeyPrefix, linger: o.WaiterLinger}
	if s.prefix == "" {
		s.prefix = DefaultKeyPrefix
	}
	switch {
	case s.linger == 0:
		s.linger = DefaultWaiterLinger
	case s.linger < 0:
		return s, drivers.OptionErrorf("waiterLinger", "must not be negative")
	}
	return s, nil
}

// config validates o and builds the client configuration. It connects
// nothing.
func (o Options) config(log *zap.Logger) (clientv3.Config, error) {
	c := clientv3.Config{Username: o.Username, Password: o.Password, Logger: log}
	if len(o.Endpoints) == 0 {
		return c, drivers.OptionErrorf("endpoints", "is required")
	}
	https := false
	for _, e := range o.Endpoints {
		switch {
		case strings.TrimSpace(e) == "":
			return c, drivers.OptionErrorf("endpoints", "has an empty address")
		case strings.Contains(e, "@"):
			return c, drivers.OptionErrorf("endpoints", "an endpoint holds an @ (put credentials in username and password)")
		}
		https = https || strings.HasPrefix(e, "https://")
		c.Endpoints = append(c.Endpoints, e)
	}
	if o.Password != "" && o.Username == "" {
		return c, drivers.OptionErrorf("password", "needs username")
	}
	switch {
	case o.DialTimeout < 0:
		return c, drivers.OptionErrorf("dialTimeout", "must not be negative")
	case o.DialTimeout == 0:
		c.DialTimeout = DefaultDialTimeout
	default:
		c.DialTimeout = o.DialTimeout
	}
	// Reconnect soon after a member comes back: gRPC's default backoff
	// grows to two minutes, past any lock's ttl.
	c.DialOptions = []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           grpcBackoff(backoff.Default),
		MinConnectTimeout: c.DialTimeout,
	})}
	tc, err := o.tls(https)
	if err != nil {
		return c, err
	}
	c.TLS = tc
	return c, nil
}

// tls builds the TLS configuration, or nil without TLS.
func (o Options) tls(https bool) (*tls.Config, error) {
	if !https && !o.TLS && o.TLSCAFile == "" && o.TLSCertFile == "" && o.TLSKeyFile == "" &&
		o.TLSServerName == "" && !o.TLSInsecureSkipVerify {
		return nil, nil
	}
	tc, err := kit.TLSConfig(nil, o.TLSCAFile, o.TLSServerName, o.TLSInsecureSkipVerify)
	if err != nil {
		return nil, err
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return nil, drivers.OptionErrorf("tlsCertFile", "set tlsCertFile and tlsKeyFile together")
	}
	if o.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile)
		if err != nil {
			return nil, drivers.OptionErrorf("tlsCertFile", "%v", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// grpcBackoff is p as gRPC's reconnection backoff: the same first delay,
// growth and cap. gRPC spreads each delay d over d·(1±Jitter) where the
// policy draws from d·[1−backoff.Jitter, 1]: a spread as wide, centred on
// d instead of below it.
func grpcBackoff(p backoff.Policy) grpcbackoff.Config {
	start, limit := p.Bounds()
	return grpcbackoff.Config{
		BaseDelay:  start,
		Multiplier: backoff.Factor,
		Jitter:     backoff.Jitter / 2,
		MaxDelay:   limit,
	}
}
