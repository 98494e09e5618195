//go:build linux

package file_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

func TestMain(m *testing.M) {
	if role := testutil.ChildRole(); role != "" {
		os.Exit(runChild(role))
	}
	goleak.VerifyTestMain(m)
}
