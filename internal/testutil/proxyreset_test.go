package testutil

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestProxyReset checks that Reset aborts a connection with an RST
// (ECONNRESET at the client, not EOF) and that new connections work.
func TestProxyReset(t *testing.T) {
	p := NewProxy(t, echo(t))
	c := dial(t, p.Addr)
	echoLine(t, c)
	p.Reset()
	buf := make([]byte, 8)
	if _, err := c.Read(buf); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after Reset: %v, want ECONNRESET", err)
	}
	c2 := dial(t, p.Addr)
	echoLine(t, c2)
}

func echoLine(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := c.Write([]byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3)
	if _, err := c.Read(buf); err != nil || string(buf) != "hi\n" {
		t.Fatalf("echo: %q %v", buf, err)
	}
}

// TestCommandTB checks that a Fatal ends Run with its message and that
// cleanups (and TempDir removal) run, last first.
func TestCommandTB(t *testing.T) {
	var order []int
	c := NewCommandTB("x")
	err := c.Run(func(tb testing.TB) error {
		tb.Cleanup(func() { order = append(order, 1) })
		tb.Cleanup(func() { order = append(order, 2) })
		tb.Fatalf("boom %d", 7)
		return nil
	})
	if err == nil || err.Error() != "boom 7" {
		t.Fatalf("Run = %v, want boom 7", err)
	}
	if len(order) != 2 || order[0] != 2 || order[1] != 1 {
		t.Fatalf("cleanups ran %v, want [2 1]", order)
	}
	if !c.Failed() {
		t.Fatal("Failed() = false after Fatalf")
	}
}
