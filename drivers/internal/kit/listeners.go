package kit

import (
	"maps"
	"slices"
	"sync"

	"github.com/mutexfx/mutexfx/drivers"
)

// Listeners are the functions a driver's Subscribe registered
// (drivers.Subscriber), called with each event the driver publishes. It is
// safe for concurrent use; the zero value is empty. A driver that keeps
// its subscriptions consistent with other state (its closed flag, a
// watcher started for the first subscriber) calls Add, the removal and
// Clear under its own mutex: Listeners never calls out under its own.
type Listeners struct {
	mu   sync.Mutex
	fns  map[int]func(drivers.Event)
	next int
}

// Add registers fn and returns its removal, which reports whether it left
// no listener. Calling the removal again does nothing (and reports false).
func (l *Listeners) Add(fn func(drivers.Event)) (remove func() (last bool)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fns == nil {
		l.fns = map[int]func(drivers.Event){}
	}
	id := l.next
	l.next++
	l.fns[id] = fn
	return func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, ok := l.fns[id]; !ok {
			return false
		}
		delete(l.fns, id)
		return len(l.fns) == 0
	}
}

// Len returns the number of listeners.
func (l *Listeners) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.fns)
}

// Clear removes every listener (the driver is closing).
func (l *Listeners) Clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.fns)
}

// Publish calls every listener with each of evs: it copies them under the
// lock and calls them outside it, so that a listener may call into the
// driver. A listener removed while Publish is under way may still get
// these events.
func (l *Listeners) Publish(evs ...drivers.Event) {
	l.mu.Lock()
	call := slices.Collect(maps.Values(l.fns))
	l.mu.Unlock()
	for _, ev := range evs {
		for _, fn := range call {
			fn(ev)
		}
	}
}
