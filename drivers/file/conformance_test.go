//go:build linux

package file_test

import (
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/drivers/file"
)

// TestConformance runs the shared suite; every New is a separate driver
// instance on the same directory, so instances exclude each other through
// the kernel's locks exactly as processes do.
func TestConformance(t *testing.T) {
	dir := t.TempDir()
	drivertest.Run(t, drivertest.Harness{
		New: func(t testing.TB) drivers.Driver {
			d, err := file.New(file.Options{Dir: dir})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return d
		},
		TTL: 300 * time.Millisecond,
	})
}
