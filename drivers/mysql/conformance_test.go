package mysql

import (
	"testing"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestConformance runs the conformance suite on the shared MariaDB in
// every mode and fence source.
func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"Advisory", Options{DSN: testutil.MySQLDSN()}},
		{"AdvisoryCounterFence", Options{DSN: testutil.MySQLDSN(), Fence: FenceCounter, FenceTable: "mutexfx_test_fence_counter"}},
		{"AdvisoryUUIDShortFence", Options{DSN: testutil.MySQLDSN(), Fence: FenceUUIDShort}},
		{"AdvisoryPrepared", Options{DSN: testutil.MySQLDSN(), PreparedStatements: true}},
		{"Table", Options{DSN: testutil.MySQLDSN(), Mode: ModeTable, Table: "mutexfx_test_locks"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			drivertest.Run(t, drivertest.Harness{New: func(t testing.TB) drivers.Driver {
				d, err := New(tc.opts)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return d
			}})
		})
	}
}
