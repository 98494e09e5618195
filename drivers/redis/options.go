package redis

import (
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
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
	// last acquisition (at least the lock's ttl). Fences of a name whose
	// counter is gone are seeded from the server's clock, so the counter
	// only guards against that clock stepping back by more than the time
	// the name was idle.
	DefaultFenceTTL = time.Hour
	// DefaultRenewBatch is the largest number of leases renewed by one
	// script call.
	DefaultRenewBatch = 1000
)

// Waiting in the store (Features.BlockingWait).
const (
	// WaitPollInterval is drivers.WaitPollInterval: how often a waiting
	// Acquire retries when no release message wakes it.
	WaitPollInterval = drivers.WaitPollInterval
	// WaiterLiveness is drivers.WaiterLiveness: how long a queued waiter
	// keeps its turn without retrying. One whose call ended (its context
	// ended, or the store failed) leaves the queue as it returns (in the
	// background), and is then passed over at once.
	WaiterLiveness = drivers.WaiterLiveness
)

// ErrOptions reports invalid driver options. Errors wrapping it name the
// offending option; they never contain a password.
var ErrOptions = drivers.ErrOptions

// Options configure a Driver built by New. Either URL or Addrs names the
// server(s).
type Options struct {
	// URL is a redis:// or rediss:// (TLS) URL, for example
	// "redis://user:secret@host:6379/2?dial_timeout=3s". With Cluster it may
	// list more nodes with "addr" query parameters and its database must be
	// 0. Mutually exclusive with Addrs. Default: none.
	//
	// Every query parameter of go-redis's URL parser (ParseURL; with
	// Cluster, ParseClusterURL) applies, with go-redis's meaning
	// (client_name, protocol, dial_timeout, read_timeout, write_timeout,
	// pool_size, pool_timeout, min_idle_conns, max_idle_conns,
	// max_active_conns, conn_max_idle_time, conn_max_lifetime, max_retries,
	// min_retry_backoff, max_retry_backoff, pool_fifo, skip_verify, ...;
	// unknown ones are errors), except that dial_timeout must be positive
	// and max_retries=0 means no retries, as MaxRetries does. Precedence:
	// a field of Options set to a non-zero value (Username, Password, DB,
	// the TLS fields, DialTimeout, CommandTimeout for both read_timeout and
	// write_timeout, PoolSize, MaxRetries) wins over the URL's parameter,
	// which wins over the driver's defaults (those of the fields, and one
	// dial attempt per connection: go-redis's dialer_retries, which only a
	// Cluster URL can set), which win over go-redis's.
	//
	// Percent-encode / ? # @ : in the user name and password, and an @ in
	// a query value (client_name=billing%40eu): a URL with an @ after its
	// host part is refused, as it may be a password that ended the host
	// part early.
	URL string `koanf:"url"`
	// Addrs are "host:port" addresses: one standalone server, the seed
	// nodes of a cluster (Cluster true) or the Sentinels (MasterName set);
	// several addresses need Cluster or MasterName. Default: none.
	Addrs []string `koanf:"addrs"`
	// MasterName is the Sentinel master name; setting it selects Sentinel
	// (failover) mode with Addrs the Sentinels. Default: "" (no Sentinel).
	MasterName string `koanf:"masterName"`
	// Cluster selects Redis Cluster mode. Default: false.
	Cluster bool `koanf:"cluster"`
	// Username is the ACL user name; it overrides the URL's.
	// Default: the URL's, else "" (the default user).
	Username string `koanf:"username"`
	// Password authenticates; it overrides the URL's and never appears in
	// errors or logs. Default: the URL's, else "" (no AUTH).
	Password string `koanf:"password"`
	// SentinelUsername is the ACL user of the Sentinels (Sentinel mode
	// only). Default: "" (the default user).
	SentinelUsername string `koanf:"sentinelUsername"`
	// SentinelPassword authenticates against the Sentinels (Sentinel mode
	// only); it never appears in errors or logs. Default: "" (no AUTH).
	SentinelPassword string `koanf:"sentinelPassword"`
	// DB is the database number (standalone and Sentinel only); it
	// overrides the URL's. Default: the URL's, else 0.
	DB int `koanf:"db"`
	// TLS enables TLS (implied by rediss://). Default: false.
	TLS bool `koanf:"tls"`
	// TLSInsecureSkipVerify disables server certificate verification
	// (testing only); false leaves a URL's skip_verify. Default: false.
	TLSInsecureSkipVerify bool `koanf:"tlsInsecureSkipVerify"`
	// TLSCAFile is a PEM file of CA certificates trusted in place of the
	// system pool. Default: "" (system pool).
	TLSCAFile string `koanf:"tlsCAFile"`
	// TLSServerName overrides the name verified in the server certificate.
	// Default: the host name.
	TLSServerName string `koanf:"tlsServerName"`
	// DialTimeout bounds each connection attempt (go-redis's DialTimeout;
	// the driver makes one attempt per connection, not go-redis's 5): an
	// unreachable server fails the first call after it. Overrides the URL's
	// dial_timeout. Default: the URL's dial_timeout, else DefaultDialTimeout
	// (5 s).
	DialTimeout time.Duration `koanf:"dialTimeout"`
	// CommandTimeout bounds a command's reads and writes on the socket when
	// the caller's context allows longer (go-redis's ReadTimeout and
	// WriteTimeout; contexts always bound them, as the driver sets
	// ContextTimeoutEnabled). Overrides the URL's read_timeout and
	// write_timeout. Default: the URL's read_timeout and write_timeout
	// (write_timeout defaulting to read_timeout; -1 or 0 there: no socket
	// timeout), else DefaultCommandTimeout (3 s).
	CommandTimeout time.Duration `koanf:"commandTimeout"`
	// PoolSize is the connection pool size (per node), in connections.
	// Overrides the URL's pool_size. Default: the URL's pool_size, else
	// go-redis's (10 per GOMAXPROCS).
	PoolSize int `koanf:"poolSize"`
	// MaxRetries is how many times go-redis retries a command after a
	// network error. Overrides the URL's max_retries. Default: the URL's
	// max_retries when positive, else 0 (none: the component retries with
	// its own backoff; go-redis's default of 3 never applies). A retried
	// acquisition whose first run took the lock gets it (the acquire script
	// recognises the caller's token); a retried release whose first run
	// released the lock reports false (not held), as the retry finds it
	// free.
	MaxRetries int `koanf:"maxRetries"`
	// Channel is the prefix of the Pub/Sub channels of release messages:
	// a driver listens on Channel + ":" + its waiter id, and a release
	// publishes only to the driver whose waiter is first in line.
	// Components sharing locks must use the same Channel.
	// Default: DefaultChannel ("mutexfx:released").
	Channel string `koanf:"channel"`
	// FenceTTL is how long a lock name's fence counter is kept after its
	// last acquisition (the counter's ttl is the longer of FenceTTL and the
	// lock's ttl); when it is gone the next fence is seeded from the
	// server's clock in microseconds, so fences still grow unless that
	// clock stepped back by more than the time the name was idle.
	// Default: DefaultFenceTTL (1 hour).
	FenceTTL time.Duration `koanf:"fenceTTL"`
	// RenewBatch is the largest number of leases renewed by one script
	// call; larger batches are split and pipelined.
	// Default: DefaultRenewBatch (1000).
	RenewBatch int `koanf:"renewBatch"`
	// RestartWait is how long nothing is granted after the driver finds
	// that the store may have forgotten locks (restarted without
	// persistence, failed over, flushed): set it to at least the longest
	// ttl any process uses on this store. Default: 0, the longest ttl this
	// driver was asked for (each driver that sees the wait lengthens it to
	// its own).
	RestartWait time.Duration `koanf:"restartWait"`
	// MinReplicas is how many replicas must confirm (WAIT) an acquisition,
	// extension or renewal within ReplicaTimeout for it to count: else an
	// acquisition is released and fails with ErrReplicas, and an extension
	// or renewal fails. In a Cluster the WAIT goes to the master of the
	// lock's slot. -1: none.
	// Default: 0, which means 1 in Sentinel and Cluster mode when the
	// (slot's) master had a replica at the driver's last new connection
	// to it, else none.
	MinReplicas int `koanf:"minReplicas"`
	// ReplicaTimeout bounds the WAIT for MinReplicas.
	// Default: DefaultReplicaTimeout (100 ms).
	ReplicaTimeout time.Duration `koanf:"replicaTimeout"`
}

// settings are the options the driver's operations need, whatever the
// client's origin.
type settings struct {
	channel        string
	fenceTTL       time.Duration
	renewBatch     int
	restartWait    time.Duration
	minReplicas    int
	replicaTimeout time.Duration
	masterName     string   // for errors
	sentinels      []string // for errors: the Sentinels' addresses
}

func (o Options) settings() (settings, error) {
	s := settings{channel: o.Channel, fenceTTL: o.FenceTTL, renewBatch: o.RenewBatch, restartWait: o.RestartWait,
		masterName: o.MasterName}
	if o.MasterName != "" {
		s.sentinels = o.Addrs
	}
	if s.restartWait < 0 {
		return s, drivers.OptionErrorf("restartWait", "must not be negative")
	}
	s.minReplicas, s.replicaTimeout = o.MinReplicas, o.ReplicaTimeout
	switch {
	case s.minReplicas < -1:
		return s, drivers.OptionErrorf("minReplicas", "must be -1 (none), 0 (the default) or a number of replicas")
	case s.replicaTimeout < 0 || (s.replicaTimeout > 0 && s.replicaTimeout < time.Millisecond):
		return s, drivers.OptionErrorf("replicaTimeout", "must be at least 1ms")
	case s.replicaTimeout == 0:
		s.replicaTimeout = DefaultReplicaTimeout
	}
	if s.channel == "" {
		s.channel = DefaultChannel
	}
	if s.fenceTTL == 0 {
		s.fenceTTL = DefaultFenceTTL
	}
	if s.fenceTTL < time.Millisecond {
		return s, drivers.OptionErrorf("fenceTTL", "must be at least 1ms")
	}
	if s.renewBatch == 0 {
		s.renewBatch = DefaultRenewBatch
	}
	if s.renewBatch < 0 {
		return s, drivers.OptionErrorf("renewBatch", "must be positive")
	}
	return s, nil
}

// universal validates o and builds go-redis options. It connects nothing.
func (o Options) universal() (*goredis.UniversalOptions, error) {
	u := &goredis.UniversalOptions{}
	switch {
	case o.URL != "" && len(o.Addrs) > 0:
		return nil, drivers.OptionErrorf("", "set url or addrs, not both")
	case o.URL == "" && len(o.Addrs) == 0:
		return nil, drivers.OptionErrorf("", "url or addrs is required")
	case o.Cluster && o.MasterName != "":
		return nil, drivers.OptionErrorf("", "cluster and masterName exclude each other")
	case o.MasterName == "" && (o.SentinelUsername != "" || o.SentinelPassword != ""):
		return nil, drivers.OptionErrorf("", "sentinelUsername and sentinelPassword need masterName (Sentinel mode)")
	case o.URL != "":
		if err := o.fromURL(u); err != nil {
			return nil, err
		}
	default:
		for _, a := range o.Addrs {
			if strings.TrimSpace(a) == "" {
				return nil, drivers.OptionErrorf("addrs", "has an empty address")
			}
		}
		if len(o.Addrs) > 1 && !o.Cluster && o.MasterName == "" {
			return nil, drivers.OptionErrorf("addrs", "several addresses need cluster (the seed nodes) or masterName (the Sentinels)")
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
			return nil, drivers.OptionErrorf("db", "must be 0 in cluster mode")
		}
		u.DB = o.DB
	}
	if o.DB < 0 {
		return nil, drivers.OptionErrorf("db", "must not be negative")
	}
	u.MasterName = o.MasterName
	u.SentinelUsername = o.SentinelUsername
	u.SentinelPassword = o.SentinelPassword
	u.IsClusterMode = o.Cluster
	if err := o.tls(u); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		key      string
		negative bool
	}{{"dialTimeout", o.DialTimeout < 0}, {"commandTimeout", o.CommandTimeout < 0}, {"poolSize", o.PoolSize < 0}, {"maxRetries", o.MaxRetries < 0}} {
		if f.negative {
			return nil, drivers.OptionErrorf(f.key, "must not be negative")
		}
	}
	// Precedence: Options' fields when set (not zero), then the URL's query
	// parameters, then the driver's defaults, then go-redis's.
	switch {
	case o.DialTimeout > 0:
		u.DialTimeout = o.DialTimeout
	case u.DialTimeout < 0: // dial_timeout=0 or -1: go-redis would fail every dial at once
		return nil, drivers.OptionErrorf("url", "dial_timeout must be positive")
	case u.DialTimeout == 0:
		u.DialTimeout = DefaultDialTimeout
	}
	if u.DialerRetries == 0 {
		u.DialerRetries = 1 // one attempt: an unreachable server fails after DialTimeout, not 5 of them
	}
	// read_timeout=-1 (or 0) in the URL disables the socket timeout, as in
	// go-redis; write_timeout defaults to the read timeout, as in go-redis.
	u.ReadTimeout = firstSet(o.CommandTimeout, u.ReadTimeout, DefaultCommandTimeout)
	u.WriteTimeout = firstSet(o.CommandTimeout, u.WriteTimeout, u.ReadTimeout)
	u.ContextTimeoutEnabled = true
	if o.PoolSize != 0 {
		u.PoolSize = o.PoolSize
	}
	switch {
	case o.MaxRetries > 0:
		u.MaxRetries = o.MaxRetries
	case u.MaxRetries <= 0: // not set, or max_retries=0 or -1 in the URL
		u.MaxRetries = -1 // go-redis: -1 disables retries, 0 means 3
	}
	u.DisableIdentity = true
	return u, nil
}

// firstSet returns the first non-zero duration of ds, or zero.
func firstSet(ds ...time.Duration) time.Duration {
	for _, d := range ds {
		if d != 0 {
			return d
		}
	}
	return 0
}

func (o Options) tls(u *goredis.UniversalOptions) error {
	if !o.TLS && u.TLSConfig == nil && o.TLSCAFile == "" && !o.TLSInsecureSkipVerify && o.TLSServerName == "" {
		return nil
	}
	// TLSInsecureSkipVerify false leaves a URL's skip_verify
	tc, err := kit.TLSConfig(u.TLSConfig, o.TLSCAFile, o.TLSServerName, o.TLSInsecureSkipVerify)
	if err != nil {
		return err
	}
	u.TLSConfig = tc
	return nil
}
