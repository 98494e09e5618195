package memory_test

import (
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	store := memory.New()
	drivertest.Run(t, drivertest.Harness{
		New: func(testing.TB) drivers.Driver { return store },
		TTL: 300 * time.Millisecond,
	})
}
