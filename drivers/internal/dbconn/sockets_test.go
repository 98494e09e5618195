package dbconn

import (
	"testing"
)

// TestSocketsKnown: the connections of a pool made through Sockets know
// their sockets, the same one each time and with the driver's state kept
// on it; a nil Sockets knows none; closing the pool leaves none behind.
func TestSocketsKnown(t *testing.T) {
	ctx, db, socks := openPool(t, mysqlPolicy)
	db.SetMaxOpenConns(1)
	p, err := socks.Pin(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if p.Sock == nil || socks.Len() != 1 {
		t.Fatalf("socket %v, %d known; want it known, 1", p.Sock, socks.Len())
	}
	p.Sock.State.uses++
	first, id := p.Sock, connID(ctx, t, p)
	p.Conn.Close()
	if p, err = socks.Pin(ctx, db); err != nil {
		t.Fatal(err)
	}
	if p.Sock != first || p.Sock.State.uses != 1 || connID(ctx, t, p) != id {
		t.Fatalf("second pin: same socket %v, state %+v; want the first's, uses 1", p.Sock == first, p.Sock.State)
	}
	if (*Sockets[state])(nil).Of(p.Conn) != nil {
		t.Fatal("a nil Sockets knows a socket")
	}
	p.Conn.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if n := socks.Len(); n != 0 {
		t.Fatalf("%d sockets left after the pool closed", n)
	}
}
