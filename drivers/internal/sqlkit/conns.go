package sqlkit

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"

	"github.com/mutexfx/mutexfx/drivers"
)

// Conns are the network connections a driver dialled itself: Close cuts
// them all at once (Cut), under whatever statement runs on them, rather
// than wait for a statement stuck on a stalled link, and no dial succeeds
// after. The zero value is ready.
type Conns struct {
	mu   sync.Mutex
	all  map[*Conn]struct{}
	done bool // Cut ran
}

// Conn is a connection of Conns.
type Conn struct {
	net.Conn
	owner *Conns
	cut   func() // before it is cut, if not nil (set before the first Cut can see it)
}

// Dial dials with dial and records the connection; after Cut it fails
// with drivers.ErrClosed. onCut, if not nil, is called before Cut closes
// the connection.
func (cs *Conns) Dial(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), network, addr string, onCut func()) (*Conn, error) {
	c, err := dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	conn := &Conn{Conn: c, owner: cs, cut: onCut}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.done {
		_ = c.Close()
		return nil, drivers.ErrClosed
	}
	if cs.all == nil {
		cs.all = map[*Conn]struct{}{}
	}
	cs.all[conn] = struct{}{}
	return conn, nil
}

// Cut closes every connection and makes later dials fail.
func (cs *Conns) Cut() {
	cs.mu.Lock()
	cs.done = true
	all := make([]*Conn, 0, len(cs.all))
	for c := range cs.all {
		all = append(all, c)
	}
	cs.mu.Unlock()
	for _, c := range all {
		if c.cut != nil {
			c.cut()
		}
		_ = c.Conn.Close()
	}
}

// Close closes the connection and forgets it.
func (c *Conn) Close() error {
	c.owner.mu.Lock()
	delete(c.owner.all, c)
	c.owner.mu.Unlock()
	return c.Conn.Close()
}

// SyscallConn returns the raw connection under c: go-sql-driver's liveness
// check of a pooled connection and the hang-up watch (package hangup) need
// it.
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("%T has no raw connection", c.Conn)
	}
	return sc.SyscallConn()
}

var _ syscall.Conn = (*Conn)(nil)
