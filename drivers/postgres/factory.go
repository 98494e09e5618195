package postgres

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
)

// Factory returns the "postgres" driver factory. Its configuration keys are
// Options' koanf tags (url, host, port, database, username, password,
// sslMode, mode, table, channel, unlogged, synchronousCommit, maxSessions,
// maxConns, connectTimeout, stallTimeout); with driver.client naming a
// *pgxpool.Pool, the connection keys must be absent. Each invalid option is
// a *config.Error at its full key path ("mutex.orders.driver.mode: ...").
func Factory() drivers.Factory {
	return drivers.Factory{
		Type:       "postgres",
		ClientType: reflect.TypeFor[*pgxpool.Pool](),
		New: func(spec drivers.Spec) (drivers.Driver, error) {
			var opts Options
			if err := config.Decode(spec.Path, spec.Options, &opts); err != nil {
				return nil, err
			}
			var d *Driver
			var err error
			if spec.Client != nil {
				pool, ok := spec.Client.(*pgxpool.Pool)
				if !ok {
					return nil, config.Errorf(config.Join(spec.Path, "client"), "is a %T, not a *pgxpool.Pool", spec.Client)
				}
				if k := connectionKey(opts); k != "" {
					return nil, config.Errorf(config.Join(spec.Path, k), "cannot be set with client (the pool's own configuration applies)")
				}
				d, err = NewWithPool(pool, opts)
			} else {
				d, err = New(opts)
			}
			if err != nil {
				return nil, specError(spec.Path, err)
			}
			return d, nil
		},
	}
}

// specError turns an option's error into a *config.Error at the option's
// full key path.
func specError(path string, err error) error {
	var ce *config.Error
	if errors.As(err, &ce) {
		if ce.Path != "" {
			path = config.Join(path, ce.Path)
		}
		return config.Errorf(path, "%s", ce.Msg)
	}
	return fmt.Errorf("%s: %w", path, err)
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
