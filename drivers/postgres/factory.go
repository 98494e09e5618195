package postgres

import (
	"reflect"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

// Factory returns the "postgres" driver factory. Its configuration keys are
// Options' koanf tags (url, host, port, database, username, password,
// sslMode, mode, table, channel, unlogged, synchronousCommit, maxSessions,
// maxConns, connectTimeout, stallTimeout); with driver.client naming a
// *pgxpool.Pool, the connection keys must be absent. Each invalid option
// (an unknown key and a value of the wrong type included) is a
// *config.Error at its full key path ("mutex.orders.driver.mode: ...") that
// also wraps ErrOptions, as the errors of New do.
func Factory() drivers.Factory {
	return drivers.Factory{
		Type:       "postgres",
		ClientType: reflect.TypeFor[*pgxpool.Pool](),
		New: kit.Factory[Options, *pgxpool.Pool, Driver]{
			Client:        "a *pgxpool.Pool",
			ConnectionKey: connectionKey,
			ClientOptions: "the pool's own configuration applies",
			New:           func(o Options, _ *zap.Logger) (Driver, error) { return New(o) },
			NewWithClient: NewWithPool,
		}.Build,
	}
}

// connectionKey names a connection option set in o, or "".
func connectionKey(o Options) string {
	for _, f := range []struct {
		key string
		set bool
	}{
		{"url", o.URL != ""}, {"host", o.Host != ""}, {"port", o.Port != 0}, {"database", o.Database != ""},
		{"username", o.Username != ""}, {"password", o.Password != ""}, {"sslMode", o.SSLMode != ""},
	} {
		if f.set {
			return f.key
		}
	}
	return ""
}
