package postgres

import (
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
	f := kit.NewFactory("a *pgxpool.Pool", New, NewWithPool)
	f.ConnectionKey, f.ClientOptions = connectionKey, "the pool's own configuration applies"
	return f.Of("postgres")
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
