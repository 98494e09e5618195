package kit_test

import (
	"testing"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

// TestListeners: each listener gets each published event; a removal
// reports the last one and is idempotent; Clear removes all.
func TestListeners(t *testing.T) {
	var l kit.Listeners
	l.Publish(drivers.Event{Key: "nobody"}) // none: nothing to call
	got := map[string][]string{}
	add := func(name string) func() bool {
		return l.Add(func(e drivers.Event) { got[name] = append(got[name], e.Key) })
	}
	removeA, removeB := add("a"), add("b")
	l.Publish(drivers.Event{Key: "k1"}, drivers.Event{Key: "k2"})
	for _, step := range []struct {
		name string
		do   func() bool
		want bool
	}{
		{"remove a", removeA, false},
		{"remove a again", removeA, false},
		{"remove b, the last", removeB, true},
	} {
		if last := step.do(); last != step.want {
			t.Fatalf("%s: last = %t; want %t", step.name, last, step.want)
		}
	}
	l.Publish(drivers.Event{Key: "k3"})
	if len(got["a"]) != 2 || len(got["b"]) != 2 || got["a"][1] != "k2" {
		t.Fatalf("events = %v; want k1, k2 to each of a and b", got)
	}
	add("c")
	l.Clear()
	if n := l.Len(); n != 0 {
		t.Fatalf("Len after Clear = %d", n)
	}
}
