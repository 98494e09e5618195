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

// waitFor polls cond until it holds or 5 s passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
