package postgres

import (
	"testing"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestConformance runs the driver conformance suite in both modes against
// the machine's PostgreSQL.
func TestConformance(t *testing.T) {
	for _, mode := range []string{ModeAdvisory, ModeTable} {
		t.Run(mode, func(t *testing.T) {
			drivertest.Run(t, drivertest.Harness{
				New: func(t testing.TB) drivers.Driver {
					d, err := New(Options{URL: testutil.PostgresDSN(), Mode: mode, Table: "mutexfx_conformance"})
					if err != nil {
						t.Fatalf("New: %v", err)
					}
					return d
				},
			})
		})
	}
}
