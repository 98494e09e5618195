package redis

import (
	"testing"

	"github.com/mutexfx/mutexfx/drivers/drivertest"
)

// TestServerTime: TIME reads the server's clock.
func TestServerTime(t *testing.T) {
	drivertest.ServerTimeNear(t, standalone(t, Options{}))
}
