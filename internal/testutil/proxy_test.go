package testutil

import (
	"bufio"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo serves one line back per line read, until the listener closes.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// dial connects to addr, closed when the test ends.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func roundTrip(c net.Conn, d time.Duration) error {
	c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err := bufio.NewReader(c).ReadString('\n')
	return err
}

func TestProxyStallAndCut(t *testing.T) {
	p := NewProxy(t, echo(t))
	c := dial(t, p.Addr)
	if err := roundTrip(c, time.Second); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	if n := p.Blocked(); n != 0 {
		t.Fatalf("Blocked = %d before Stall", n)
	}
	p.Stall()
	if err := roundTrip(c, 200*time.Millisecond); err == nil {
		t.Fatal("a stalled link answered")
	}
	if n := p.Blocked(); n != 1 {
		t.Fatalf("Blocked = %d after a request into the stall; want 1", n)
	}
	p.Resume()
	c2 := dial(t, p.Addr)
	if err := roundTrip(c2, time.Second); err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	p.Cut()
	if err := roundTrip(c2, time.Second); err == nil {
		t.Fatal("a cut link answered")
	}
	p.Heal()
	c3 := dial(t, p.Addr)
	if err := roundTrip(c3, time.Second); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
	if FreePort(t) == 0 {
		t.Fatal("FreePort returned 0")
	}
}

// TestProxyCutWhileDialling: a connection accepted before Cut whose
// upstream is dialled after it is cut too, not forwarded.
func TestProxyCutWhileDialling(t *testing.T) {
	// Set before the proxy serves and reset after it stopped (cleanups
	// run last first).
	testHookDialed = func(p *Proxy) { p.Cut() }
	t.Cleanup(func() { testHookDialed = nil })
	p := NewProxy(t, echo(t))
	c := dial(t, p.Addr)
	if err := roundTrip(c, time.Second); err == nil {
		t.Fatal("a connection dialled across Cut answered")
	}
}
