package redis

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Defaults of Options.
const (
	// DefaultDialTimeout bounds the first (and every) connection attempt.
	DefaultDialTimeout = 5 * time.Second
	// DefaultCommandTimeout bounds a command's network reads and writes
	// when the caller's context has no earlier deadline.
	DefaultCommandTimeout = 3 * time.Second
	// DefaultChannel is the prefix of the Pub/Sub channels of release
	// messages (see Options.Channel).
	DefaultChannel = "mutexfx:released"
	// DefaultFenceTTL is how long a lock's fence counter is kept after its
	// last acquisition.
	DefaultFenceTTL = 7 * 24 * time.Hour
	// DefaultRenewBatch is the largest number of leases renewed by one
	// script call.
	DefaultRenewBatch = 1000
)

// ErrOptions reports invalid driver options. Errors wrapping it name the
// offending option; they never contain a password.
var ErrOptions = errors.New("redis: invalid options")

// Options configure a Driver built by New. Either URL or Addrs names the
// server(s).
type Options struct {
	// URL is a redis:// or rediss:// (TLS) URL, for example
	// "redis://user:secret@host:6379/2?dial_timeout=3s". With Cluster it may
	// list more nodes with "addr" query parameters (go-redis
	// ParseClusterURL). Username, Password, DB and the TLS fields, when set,
	// override the URL's. Percent-encode / ? # @ : in the user name and
	// password. Mutually exclusive with Addrs. Default: none.
	URL string `koanf:"url"`
	// Addrs are "host:port" addresses: one standalone server, the seed
	// nodes of a cluster (Cluster true) or the Sentinels (MasterName set).
	// Default: none.
	Addrs []string `koanf:"addrs"`
	// MasterName is the Sentinel master name; setting it selects Sentinel
	// (failover) mode with Addrs the Sentinels. Default: "" (no Sentinel).
	MasterName string `koanf:"masterName"`
	// Cluster selects Redis Cluster mode. Default: false.
	Cluster bool `koanf:"cluster"`
	// Username is the ACL user name. Default: "" (the default user).
	Username string `koanf:"username"`
	// Password authenticates; it never appears in errors or logs.
	// Default: "" (no AUTH).
	Password string `koanf:"password"`
	// SentinelUsername is the ACL user of the Sentinels (Sentinel mode
	// only). Default: "" (the default user).
	SentinelUsername string `koanf:"sentinelUsername"`
	// SentinelPassword authenticates against the Sentinels (Sentinel mode
	// only); it never appears in errors or logs. Default: "" (no AUTH).
	SentinelPassword string `koanf:"sentinelPassword"`
	// DB is the database number (standalone and Sentinel only).
	// Default: 0.
	DB int `koanf:"db"`
	// TLS enables TLS (implied by rediss://). Default: false.
	TLS bool `koanf:"tls"`
	// TLSInsecureSkipVerify disables server certificate verification
	// (testing only). Default: false.
	TLSInsecureSkipVerify bool `koanf:"tlsInsecureSkipVerify"`
	// TLSCAFile is a PEM file of CA certificates trusted in place of the
	// system pool. Default: "" (system pool).
	TLSCAFile string `koanf:"tlsCAFile"`
	// TLSServerName overrides the name verified in the server certificate.
	// Default: the host name.
	TLSServerName string `koanf:"tlsServerName"`
	// DialTimeout bounds each connection attempt: an unreachable server
	// fails the first call after it. Default: DefaultDialTimeout (5 s).
	DialTimeout time.Duration `koanf:"dialTimeout"`
	// CommandTimeout bounds a command's reads and writes on the socket when
	// the caller's context allows longer. Default: DefaultCommandTimeout
	// (3 s).
	CommandTimeout time.Duration `koanf:"commandTimeout"`
	// PoolSize is the connection pool size (per node). Default: go-redis's
	// (10 per GOMAXPROCS).
	PoolSize int `koanf:"poolSize"`
	// MaxRetries is how many times go-redis retries a command after a
	// network error. Default: 0 (none: the component retries with its own
	// backoff). A retried acquisition whose first run took the lock gets it
	// (the acquire script recognises the caller's token); a retried release
	// whose first run released the lock reports false (not held), as the
	// retry finds it free.
	MaxRetries int `koanf:"maxRetries"`
	// Channel is the prefix of the Pub/Sub channels of release messages:
	// a driver listens on Channel + ":" + its waiter id, and a release
	// publishes only to the driver whose waiter is first in line.
	// Components sharing locks must use the same Channel.
	// Default: DefaultChannel ("mutexfx:released").
	Channel string `koanf:"channel"`
	// FenceTTL is how long a lock name's fence counter is kept after its
	// last acquisition; when it is gone the next fence is seeded from the
	// server's clock in microseconds, so fences still grow.
	// Default: DefaultFenceTTL (7 days).
	FenceTTL time.Duration `koanf:"fenceTTL"`
	// RenewBatch is the largest number of leases renewed by one script
	// call; larger batches are split and pipelined.
	// Default: DefaultRenewBatch (1000).
	RenewBatch int `koanf:"renewBatch"`
}

// settings are the options the driver's operations need, whatever the
// client's origin.
type settings struct {
	channel    string
	fenceTTL   time.Duration
	renewBatch int
}

func (o Options) settings() (settings, error) {
	s := settings{channel: o.Channel, fenceTTL: o.FenceTTL, renewBatch: o.RenewBatch}
	if s.channel == "" {
		s.channel = DefaultChannel
	}
	if s.fenceTTL == 0 {
		s.fenceTTL = DefaultFenceTTL
	}
	if s.fenceTTL < time.Millisecond {
		return s, fmt.Errorf("%w: fenceTTL: must be at least 1ms", ErrOptions)
	}
	if s.renewBatch == 0 {
		s.renewBatch = DefaultRenewBatch
	}
	if s.renewBatch < 0 {
		return s, fmt.Errorf("%w: renewBatch: must be positive", ErrOptions)
	}
	return s, nil
}

// universal validates o and builds go-redis options. It connects nothing.
func (o Options) universal() (*goredis.UniversalOptions, error) {
	u := &goredis.UniversalOptions{}
	switch {
	case o.URL != "" && len(o.Addrs) > 0:
		return nil, fmt.Errorf("%w: set url or addrs, not both", ErrOptions)
	case o.URL == "" && len(o.Addrs) == 0:
		return nil, fmt.Errorf("%w: url or addrs is required", ErrOptions)
	case o.Cluster && o.MasterName != "":
		return nil, fmt.Errorf("%w: cluster and masterName exclude each other", ErrOptions)
	case o.MasterName == "" && (o.SentinelUsername != "" || o.SentinelPassword != ""):
		return nil, fmt.Errorf("%w: sentinelUsername and sentinelPassword need masterName (Sentinel mode)", ErrOptions)
	case o.URL != "":
		if err := o.fromURL(u); err != nil {
			return nil, err
		}
	default:
		for _, a := range o.Addrs {
			if strings.TrimSpace(a) == "" {
				return nil, fmt.Errorf("%w: addrs: has an empty address", ErrOptions)
			}
		}
		u.Addrs = append([]string(nil), o.Addrs...)
	}
	if o.Username != "" {
		u.Username = o.Username
	}
	if o.Password != "" {
		u.Password = o.Password
	}
	if o.DB != 0 {
		if o.Cluster {
			return nil, fmt.Errorf("%w: db: must be 0 in cluster mode", ErrOptions)
		}
		u.DB = o.DB
	}
	if o.DB < 0 {
		return nil, fmt.Errorf("%w: db: must not be negative", ErrOptions)
	}
	u.MasterName = o.MasterName
	u.SentinelUsername = o.SentinelUsername
	u.SentinelPassword = o.SentinelPassword
	u.IsClusterMode = o.Cluster
	if err := o.tls(u); err != nil {
		return nil, err
	}
	if o.DialTimeout < 0 || o.CommandTimeout < 0 || o.PoolSize < 0 || o.MaxRetries < 0 {
		return nil, fmt.Errorf("%w: dialTimeout, commandTimeout, poolSize and maxRetries must not be negative", ErrOptions)
	}
	// Options fields win over URL query parameters, which win over defaults.
	u.DialTimeout = first(o.DialTimeout, u.DialTimeout, DefaultDialTimeout)
	u.DialerRetries = 1 // one attempt: an unreachable server fails after DialTimeout, not 5 of them
	u.ReadTimeout = first(o.CommandTimeout, u.ReadTimeout, DefaultCommandTimeout)
	u.WriteTimeout = first(o.CommandTimeout, u.WriteTimeout, DefaultCommandTimeout)
	u.ContextTimeoutEnabled = true
	if o.PoolSize != 0 {
		u.PoolSize = o.PoolSize
	}
	if o.MaxRetries != 0 {
		u.MaxRetries = o.MaxRetries
	}
	if u.MaxRetries == 0 {
		u.MaxRetries = -1 // go-redis: -1 disables retries, 0 means 3
	}
	u.DisableIdentity = true
	return u, nil
}

// urlProblems are the kinds of url.Parse errors, named in New's error in
// place of the parser's message, which quotes parts of the URL.
var urlProblems = []string{
	"invalid port", "invalid character", "invalid URL escape", "invalid control character", "invalid userinfo",
	"invalid IP-literal", "missing ']' in host", "invalid host", "missing protocol scheme",
	"first path segment in URL cannot contain colon",
}

// notShown ends the errors of a URL that could not be parsed.
const notShown = "(the URL is not shown: it may hold a password; percent-encode / ? # @ : in the user name and password)"

// fromURL parses o.URL into u. Errors never contain the URL (it may hold a
// password), nor any part of one that could not be parsed: a password with
// an unescaped / ? or # ends the host part early, so the parser takes
// pieces of it for the port, the path or the query.
func (o Options) fromURL(u *goredis.UniversalOptions) error {
	if misplacedAt(o.URL) {
		return fmt.Errorf("%w: url: an @ after the host %s", ErrOptions, notShown)
	}
	parsed, err := url.Parse(o.URL)
	if err != nil {
		kind := "malformed"
		for _, p := range urlProblems {
			if strings.Contains(err.Error(), p) {
				kind = p
				break
			}
		}
		return fmt.Errorf("%w: url: %s %s", ErrOptions, kind, notShown)
	}
	secret, _ := parsed.User.Password()
	switch parsed.Scheme {
	case "redis", "rediss":
	default:
		return fmt.Errorf("%w: url: scheme must be redis or rediss, not %q", ErrOptions, parsed.Scheme)
	}
	if o.Cluster {
		co, err := goredis.ParseClusterURL(o.URL)
		if err != nil {
			return fmt.Errorf("%w: url: %s", ErrOptions, scrub(err.Error(), o.URL, secret, o.Password))
		}
		u.Addrs, u.Username, u.Password, u.TLSConfig = co.Addrs, co.Username, co.Password, co.TLSConfig
		u.DialTimeout, u.ReadTimeout, u.WriteTimeout = co.DialTimeout, co.ReadTimeout, co.WriteTimeout
		u.PoolSize = co.PoolSize
		return nil
	}
	so, err := goredis.ParseURL(o.URL)
	if err != nil {
		return fmt.Errorf("%w: url: %s", ErrOptions, scrub(err.Error(), o.URL, secret, o.Password))
	}
	u.Addrs = []string{so.Addr}
	u.Username, u.Password, u.DB, u.TLSConfig = so.Username, so.Password, so.DB, so.TLSConfig
	u.DialTimeout, u.ReadTimeout, u.WriteTimeout = so.DialTimeout, so.ReadTimeout, so.WriteTimeout
	u.PoolSize = so.PoolSize
	if so.MaxRetries > 0 {
		u.MaxRetries = so.MaxRetries
	}
	return nil
}

func (o Options) tls(u *goredis.UniversalOptions) error {
	if !o.TLS && u.TLSConfig == nil && o.TLSCAFile == "" && !o.TLSInsecureSkipVerify && o.TLSServerName == "" {
		return nil
	}
	if u.TLSConfig == nil {
		u.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if o.TLSServerName != "" {
		u.TLSConfig.ServerName = o.TLSServerName
	}
	u.TLSConfig.InsecureSkipVerify = o.TLSInsecureSkipVerify //nolint:gosec // explicit option
	if o.TLSCAFile != "" {
		pem, err := os.ReadFile(o.TLSCAFile)
		if err != nil {
			return fmt.Errorf("%w: tlsCAFile: %v", ErrOptions, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("%w: tlsCAFile: no PEM certificate in %s", ErrOptions, o.TLSCAFile)
		}
		u.TLSConfig.RootCAs = pool
	}
	return nil
}

// misplacedAt reports whether raw has an @ after its host part (which ends
// at the first / ? or # after "//") where none can be: in the path (the
// database number), the fragment, or a query parameter's name. The user
// name or password then holds an unescaped / ? or #. An @ in a query
// value (client_name=billing@eu) is data.
func misplacedAt(raw string) bool {
	_, rest, ok := strings.Cut(raw, "//")
	if !ok {
		return false
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		return false
	}
	rest, fragment, _ := strings.Cut(rest[end:], "#")
	path, query, _ := strings.Cut(rest, "?")
	if strings.Contains(path, "@") || strings.Contains(fragment, "@") {
		return true
	}
	for _, param := range strings.Split(query, "&") {
		if name, _, _ := strings.Cut(param, "="); strings.Contains(name, "@") {
			return true
		}
	}
	return false
}

// first returns the first positive duration of ds, or the last one.
func first(ds ...time.Duration) time.Duration {
	for _, d := range ds {
		if d > 0 {
			return d
		}
	}
	return ds[len(ds)-1]
}

// scrub removes the URL and the secrets from an error message.
func scrub(msg, rawURL string, secrets ...string) string {
	if rawURL != "" {
		msg = strings.ReplaceAll(msg, rawURL, "<url>")
	}
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
			msg = strings.ReplaceAll(msg, url.QueryEscape(s), "xxxxx")
			msg = strings.ReplaceAll(msg, url.PathEscape(s), "xxxxx")
		}
	}
	return msg
}
