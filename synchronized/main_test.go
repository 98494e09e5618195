package synchronized_test

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newMutex returns a Mutex on a fresh memory store, closed at the test's end.
func newMutex(t *testing.T) (*component.Mutex, *memory.Driver) {
	t.Helper()
	drv := memory.New()
	m, err := component.New(component.Options{Driver: drv, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m, drv
}
