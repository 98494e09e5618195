//go:build linux

package faultsuite

import (
	"testing"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m, runTestChild) }
