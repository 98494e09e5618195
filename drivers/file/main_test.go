//go:build linux

package file_test

import (
	"testing"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m, runChild) }
