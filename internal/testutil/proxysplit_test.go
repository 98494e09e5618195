package testutil

import (
	"io"
	"testing"
	"time"
)

// TestProxySplitNext: the next read longer than n is forwarded as its
// first n bytes; the rest waits for Resume, and shorter reads before it
// pass whole.
func TestProxySplitNext(t *testing.T) {
	p := NewProxy(t, echo(t))
	c := dial(t, p.Addr)
	p.SplitNext(4)
	if err := roundTrip(c, time.Second); err != nil { // "ping\n": 5 bytes, split on its way out
		if p.Blocked() == 0 {
			t.Fatalf("no bytes held after a read longer than the split: %v", err)
		}
	} else {
		t.Fatal("a split line came back whole before Resume")
	}
	p.Resume()
	c.SetDeadline(time.Now().Add(time.Second))
	got := make([]byte, 5)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "ping\n" {
		t.Fatalf("after Resume read %q, %v; want the whole line", got, err)
	}
	if err := roundTrip(c, time.Second); err != nil {
		t.Fatalf("the split is used up, yet: %v", err)
	}
}
