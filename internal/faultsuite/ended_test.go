//go:build linux

package faultsuite

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

// TestEndedLogger checks that a child's Mutex logger turns the loss of a
// lock into an Ended event naming its process, lock and fence, stamped
// before the lock's context ends: the checker reads "told lost" from it.
func TestEndedLogger(t *testing.T) {
	var mu sync.Mutex
	var got []Event
	emit := func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e)
	}
	m, err := component.New(component.Options{Driver: memory.New(), TTL: time.Second, Logger: endedLogger("p1.0", emit)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close(context.Background()) }()
	ctx := context.Background()
	l, err := m.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := m.ForceRelease(ctx, "x"); !ok || err != nil {
		t.Fatalf("ForceRelease = %v, %v", ok, err)
	}
	<-l.Done() // the Mutex learns it from the store's event or a renewal
	seen := Now()
	if l.Err() == nil {
		t.Fatal("Lock.Err() = nil after its context ended")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("events = %+v, want one Ended", got)
	}
	e := got[0]
	if e.Kind != Ended || e.Proc != "p1.0" || e.Lock != "x" || e.Fence != l.Fence() || e.Detail == "" {
		t.Errorf("event = %+v, want Ended of p1.0, x, fence %d, with its cause", e, l.Fence())
	}
	if e.T <= 0 || e.T > seen {
		t.Errorf("stamped at %d, not before the loss was seen (%d)", e.T, seen)
	}
}
