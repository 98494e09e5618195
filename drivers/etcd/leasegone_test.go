package etcd

import (
	"testing"
	"time"
)

// TestLeaseGoneOrderedWithUnuse: a lease found gone by one call while
// another call ends its use of a lock on that lease. leaseGone writes the
// entry's fields while the entry is unused and unuse reads them under
// Driver.mu only; without an order between the two the race detector
// reports it (it did in the fault suite). No store is needed: the lease is
// the driver's record of one.
func TestLeaseGoneOrderedWithUnuse(t *testing.T) {
	d := newDriver(settings{prefix: DefaultKeyPrefix, linger: time.Minute})
	for i := range 50 {
		l := &lease{id: 1, ttl: 2 * time.Second}
		e, err := d.use("k")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.mu.lock(t.Context()); err != nil {
			t.Fatal(err)
		}
		e.token, e.rev, e.lease, e.held = "tok", int64(i+1), l, true
		e.mu.unlock()

		done := make(chan struct{})
		go func() {
			defer close(done)
			d.unuse(e) // the call's use ends as the lease is found gone
		}()
		d.leaseGone(l)
		<-done

		if err := e.mu.lock(t.Context()); err != nil {
			t.Fatal(err)
		}
		rev, held := e.rev, e.held
		e.mu.unlock()
		if rev != 0 || held {
			t.Fatalf("round %d: lock on a lease gone still recorded: rev %d, held %v", i, rev, held)
		}
		d.mu.Lock()
		e.stopLinger()
		delete(d.entries, "k") // the next round starts afresh
		d.mu.Unlock()
	}
	if err := d.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}
