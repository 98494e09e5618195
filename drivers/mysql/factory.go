package mysql

import (
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

// Factory returns the "mysql" driver factory. The driver block's keys are
// the koanf tags of Options; with driver.client naming a *sql.DB of the fx
// graph, the driver uses that pool (see NewWithDB) and never closes it.
func Factory() drivers.Factory {
	return kit.NewFactory("a *sql.DB", New, NewWithDB).Of("mysql")
}
