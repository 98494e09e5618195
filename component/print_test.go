package component_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestPrinted: a Mutex prints its name, prefix and driver type, a Lock its
// name, key and fence — never its token — every way it may be printed.
func TestPrinted(t *testing.T) {
	m := newMutex(t, component.Options{Name: "orders", Prefix: "o:"})
	l, err := m.Acquire(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	var none *component.Lock
	for how, out := range testutil.Printed(map[string]any{"mutex": m, "lock": l, "nil lock": none, "zero mutex": &component.Mutex{}}) {
		if strings.Contains(out, l.Token()) {
			t.Errorf("%s prints the token: %s", how, out)
		}
	}
	if got, want := m.String(), "component.Mutex{Name:orders Prefix:o: Driver:*memory.Driver}"; got != want {
		t.Errorf("String() = %s; want %s", got, want)
	}
	if got, want := l.String(), "component.Lock{Name:x Key:o:x Fence:1}"; got != want {
		t.Errorf("String() = %s; want %s", got, want)
	}
}
