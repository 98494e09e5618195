package redis

import (
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
	f := kit.Factory[Options, goredis.UniversalClient, *Driver]{
		Client: "a redis.UniversalClient",
		ConnectionKeys: []string{"url", "addrs", "masterName", "sentinelUsername", "sentinelPassword", "cluster",
			"username", "password", "db", "tls", "dialTimeout", "commandTimeout", "poolSize", "maxRetries"},
		New:           func(o Options, _ *zap.Logger) (*Driver, error) { return New(o) },
		NewWithClient: NewWithClient,
	}
	typed := f.Of(Type)
	typed.New = func(spec drivers.Spec) (drivers.Driver, error) {
		LogTo(spec.Logger)
		return f.Build(spec)
	}
	return typed
}
