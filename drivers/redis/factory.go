package redis

import (
	"reflect"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
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

var factory = kit.Factory[Options, goredis.UniversalClient, *Driver]{
	Client:        "a redis.UniversalClient",
	ConnectionKey: connectionKey,
	New:           func(o Options, _ *zap.Logger) (*Driver, error) { return New(o) },
	NewWithClient: NewWithClient,
}

func newFromSpec(spec drivers.Spec) (drivers.Driver, error) {
	LogTo(spec.Logger)
	return factory.Build(spec)
}

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
