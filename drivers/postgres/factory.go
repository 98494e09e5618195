package postgres

import (
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
// *pgxpool.Pool, the connection keys must be absent.
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
				d, err = NewWithPool(pool, opts)
			} else {
				d, err = New(opts)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", spec.Path, err)
			}
			return d, nil
		},
	}
}
