package testutil

import (
	"testing"
	"time"
)

// TestProxyHoldNext: the connection after HoldNext sends nothing upstream
// until Release, the connections before and after it are not held, and
// Cut closes the held connection.
func TestProxyHoldNext(t *testing.T) {
	p := NewProxy(t, echo(t))
	before := dial(t, p.Addr)
	if err := roundTrip(before, time.Second); err != nil {
		t.Fatalf("before HoldNext: %v", err)
	}

	hold := p.HoldNext()
	held := dial(t, p.Addr)
	<-hold.Arrived()
	if err := roundTrip(held, 200*time.Millisecond); err == nil {
		t.Fatal("a held connection answered")
	}
	after := dial(t, p.Addr)
	if err := roundTrip(after, time.Second); err != nil {
		t.Fatalf("the connection after the held one: %v", err)
	}
	if err := roundTrip(before, time.Second); err != nil {
		t.Fatalf("the connection before the held one: %v", err)
	}
	hold.Release()
	if err := roundTrip(held, time.Second); err != nil {
		t.Fatalf("after Release: %v", err)
	}

	cut := p.HoldNext()
	c := dial(t, p.Addr)
	<-cut.Arrived()
	cut.Cut()
	if err := roundTrip(c, time.Second); err == nil {
		t.Fatal("a cut held connection answered")
	}
}

// TestProxyCloseReleasesHolds: a hold never released ends with the proxy.
func TestProxyCloseReleasesHolds(t *testing.T) {
	p := NewProxy(t, echo(t))
	hold := p.HoldNext()
	dial(t, p.Addr)
	<-hold.Arrived()
	p.Close() // waits for its goroutines, the held one's too
}
