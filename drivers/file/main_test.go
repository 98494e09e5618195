//go:build linux

package file_test

import (
	"os"
	"testing"

	"github.com/mutexfx/mutexfx/drivers/file"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// envMechanism names the Mechanism the whole suite runs with (its children
// inherit it); unset, the platform's default.
const envMechanism = "MUTEXFX_FILE_MECHANISM"

func TestMain(m *testing.M) {
	if mech := os.Getenv(envMechanism); mech != "" {
		file.SetDefaultMechanism(file.Mechanism(mech))
	}
	testutil.Main(m, runChild)
}
