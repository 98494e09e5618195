package bubble

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestUnpool: Unpooled is set for the test that asked, and only for it.
func TestUnpool(t *testing.T) {
	t.Run("inner", func(t *testing.T) {
		Unpool(t)
		if !Unpooled.Load() {
			t.Fatal("Unpooled not set")
		}
	})
	if Unpooled.Load() {
		t.Fatal("Unpooled still set after the test that set it")
	}
}
