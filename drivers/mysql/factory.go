package mysql

import (
	"database/sql"
	"reflect"

	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

// Factory returns the "mysql" driver factory. The driver block's keys are
// the koanf tags of Options; with driver.client naming a *sql.DB of the fx
// graph, the driver uses that pool (see NewWithDB) and never closes it.
func Factory() drivers.Factory {
	return drivers.Factory{
		Type:       "mysql",
		ClientType: reflect.TypeFor[*sql.DB](),
		New: kit.Factory[Options, *sql.DB, Driver]{
			Client:        "a *sql.DB",
			Check:         checkRenamed,
			New:           func(o Options, _ *zap.Logger) (Driver, error) { return New(o) },
			NewWithClient: NewWithDB,
		}.Build,
	}
}
