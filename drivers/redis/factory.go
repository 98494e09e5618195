package redis

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
)

// Type is the driver's name in configuration (driver.type).
const Type = "redis"

// Factory returns the factory the mutexfx module uses to build Redis
// drivers from configuration. The driver block's keys are Options' koanf
// tags (url, addrs, masterName, cluster, username, password, db, tls, ...);
// unknown keys are errors naming the full key path. With driver.client set,
// the application's client is used and never closed; then only channel,
// fenceTTL, renewBatch, restartWait, minReplicas and replicaTimeout may be
// set. The client is provided as a
// goredis.UniversalClient but must be a *goredis.Client or a
// *goredis.ClusterClient (see NewWithClient): a Ring, an AutoPipeliner or
// another wrapper is an error at driver.client.
func Factory() drivers.Factory {
	return drivers.Factory{
		Type:       Type,
		New:        newFromSpec,
		ClientType: reflect.TypeFor[goredis.UniversalClient](),
	}
}

func newFromSpec(spec drivers.Spec) (drivers.Driver, error) {
	LogTo(spec.Logger)
	var opts Options
	if err := config.Decode(spec.Path, spec.Options, &opts); err != nil {
		return nil, err
	}
	if spec.Client != nil {
		c, ok := spec.Client.(goredis.UniversalClient)
		if !ok {
			return nil, config.Errorf(config.Join(spec.Path, "client"), "is a %T, not a redis.UniversalClient", spec.Client)
		}
		if k := connectionKey(opts); k != "" {
			return nil, config.Errorf(config.Join(spec.Path, k), "cannot be set with client (the client's own options apply)")
		}
		d, err := NewWithClient(c, opts)
		if err != nil {
			return nil, specError(spec.Path, err)
		}
		return d, nil
	}
	d, err := New(opts)
	if err != nil {
		return nil, specError(spec.Path, err)
	}
	return d, nil
}

// specError turns an ErrOptions error into a config error at path that
// still wraps ErrOptions. The message keeps "redis: invalid options" out
// and the option name in.
func specError(path string, err error) error {
	if errors.Is(err, ErrOptions) {
		msg := strings.TrimPrefix(err.Error(), ErrOptions.Error()+": ")
		if key, rest, ok := strings.Cut(msg, ": "); ok && !strings.ContainsAny(key, " ,") {
			return pathError{&config.Error{Path: config.Join(path, key), Msg: rest}}
		}
		return pathError{&config.Error{Path: path, Msg: msg}}
	}
	return fmt.Errorf("%s: %w", path, err)
}

// pathError is an invalid option at its full key path, as the factory
// returns it: it reads as its *config.Error and wraps both it and
// ErrOptions.
type pathError struct{ ce *config.Error }

func (e pathError) Error() string { return e.ce.Error() }

func (e pathError) Unwrap() []error { return []error{ErrOptions, e.ce} }

// connectionKey names a connection option set in opts, or "".
func connectionKey(o Options) string {
	switch {
	case o.URL != "":
		return "url"
	case len(o.Addrs) > 0:
		return "addrs"
	case o.MasterName != "":
		return "masterName"
	case o.SentinelUsername != "":
		return "sentinelUsername"
	case o.SentinelPassword != "":
		return "sentinelPassword"
	case o.Cluster:
		return "cluster"
	case o.Username != "":
		return "username"
	case o.Password != "":
		return "password"
	case o.DB != 0:
		return "db"
	case o.TLS || o.TLSInsecureSkipVerify || o.TLSCAFile != "" || o.TLSServerName != "":
		return "tls"
	case o.DialTimeout != 0:
		return "dialTimeout"
	case o.CommandTimeout != 0:
		return "commandTimeout"
	case o.PoolSize != 0:
		return "poolSize"
	case o.MaxRetries != 0:
		return "maxRetries"
	}
	return ""
}
