package postgres

import (
	"testing"

	"github.com/mutexfx/mutexfx/drivers/drivertest"
)

// TestServerTime: clock_timestamp() reads the server's clock, in both
// modes.
func TestServerTime(t *testing.T) {
	for _, mode := range []string{ModeAdvisory, ModeTable} {
		t.Run(mode, func(t *testing.T) { drivertest.ServerTimeNear(t, shared(t, Options{Mode: mode})) })
	}
}
