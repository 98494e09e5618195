package mysql

import (
	"database/sql"
	"errors"
	"fmt"
	"reflect"

	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers"
)

// Factory returns the "mysql" driver factory. The driver block's keys are
// the koanf tags of Options; with driver.client naming a *sql.DB of the fx
// graph, the driver uses that pool (see NewWithDB) and never closes it.
func Factory() drivers.Factory {
	return drivers.Factory{
		Type:       "mysql",
		ClientType: reflect.TypeFor[*sql.DB](),
		New: func(spec drivers.Spec) (drivers.Driver, error) {
			var opts Options
			if err := checkRenamed(spec.Path, spec.Options); err != nil {
				return nil, err
			}
			if err := config.Decode(spec.Path, spec.Options, &opts); err != nil {
				return nil, err
			}
			var (
				d   Driver
				err error
			)
			if spec.Client != nil {
				db, ok := spec.Client.(*sql.DB)
				if !ok {
					return nil, config.Errorf(config.Join(spec.Path, "client"), "is a %T, not a *sql.DB", spec.Client)
				}
				d, err = NewWithDB(db, opts)
			} else {
				d, err = New(opts)
			}
			if err != nil {
				var ce *config.Error
				if errors.As(err, &ce) {
					path := spec.Path
					if ce.Path != "" {
						path = config.Join(spec.Path, ce.Path)
					}
					return nil, config.Errorf(path, "%s", ce.Msg)
				}
				return nil, fmt.Errorf("%s: %w", spec.Path, err)
			}
			return d, nil
		},
	}
}
