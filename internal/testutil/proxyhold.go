package testutil

import (
	"net"
	"sync"
)

// Hold is the next connection a Proxy accepts after HoldNext: its
// upstream is dialled, but nothing the client sends is forwarded (it waits
// in the socket) until Release, as a request in flight on a slow link
// would. Replies still flow.
type Hold struct {
	arrived chan struct{} // closed when the connection is accepted
	release chan struct{} // closed by Release
	once    sync.Once

	mu         sync.Mutex
	client, up net.Conn
}

// holds are a Proxy's Holds, guarded by Proxy.mu.
type holds struct {
	next *Hold   // the one the next accepted connection takes
	all  []*Hold // released by Close
}

// HoldNext holds the next connection the proxy accepts (see Hold).
func (p *Proxy) HoldNext() *Hold {
	h := &Hold{arrived: make(chan struct{}), release: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		h.Release()
	}
	p.holds.next = h
	p.holds.all = append(p.holds.all, h)
	return h
}

// take gives the accepted connection (client, up) to the pending Hold, if
// any, and returns it (nil: none); Proxy.mu held.
func (hs *holds) take(client, up net.Conn) *Hold {
	h := hs.next
	if h == nil {
		return nil
	}
	hs.next = nil
	h.mu.Lock()
	h.client, h.up = client, up
	h.mu.Unlock()
	close(h.arrived)
	return h
}

// releaseAll releases every Hold (the proxy is closing); Proxy.mu held.
func (hs *holds) releaseAll() {
	for _, h := range hs.all {
		h.Release()
	}
	hs.next = nil
}

// wait blocks until h is released; a nil h does not block.
func (h *Hold) wait() {
	if h != nil {
		<-h.release
	}
}

// Arrived is closed when the held connection has been accepted.
func (h *Hold) Arrived() <-chan struct{} { return h.arrived }

// Release forwards what the client sent and will send. Idempotent.
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }

// Cut closes the held connection, both ways (what it held back is lost),
// and releases the hold; nothing happens if it has not arrived.
func (h *Hold) Cut() {
	h.mu.Lock()
	client, up := h.client, h.up
	h.mu.Unlock()
	if client != nil {
		client.Close()
		up.Close()
	}
	h.Release()
}
