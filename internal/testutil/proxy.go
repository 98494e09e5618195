// Package testutil holds helpers for mutexfx's own tests: free ports, a TCP
// proxy that can stall or cut a link, and child processes re-executing the
// test binary. It is internal: applications use package fxtest.
package testutil

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
)

// handedOut are the ports FreePort returned in this process.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// that it never returned before in this process: the kernel may hand the
// same free port out twice in a row, and a server given it twice (an etcd
// member's client and peer ports) fails to start.
func FreePort(t testing.TB) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
}

// Proxy forwards TCP connections from Addr to a target. Stall makes it stop
// moving bytes (both ways) while keeping the connections open, as a hung
// network would; Cut closes every connection; both can be undone.
type Proxy struct {
	// Addr is the proxy's listen address, "127.0.0.1:port".
	Addr string

	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu      sync.Mutex
	cond    *sync.Cond
	stalled bool
	blocked int // pipes holding bytes back while stalled
	split   int // SplitNext's n, until a read longer than it comes
	refuse  bool
	closed  bool
	conns   map[net.Conn]struct{}
	holds   holds // HoldNext's (proxyhold.go)
}

// NewProxy starts a proxy to target and stops it when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// Port returns the proxy's port.
func (p *Proxy) Port() int {
	_, port, _ := net.SplitHostPort(p.Addr)
	n, _ := strconv.Atoi(port)
	return n
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.refuse || p.closed {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if testHookDialed != nil {
			testHookDialed(p)
		}
		p.mu.Lock()
		if p.refuse || p.closed {
			// Cut (or Close) came while this one was being dialled: it
			// is cut too, or it would carry the traffic Cut should stop.
			p.mu.Unlock()
			c.Close()
			up.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.conns[up] = struct{}{}
		h := p.holds.take(c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go func() {
			h.wait()
			p.pipe(up, c)
		}()
	}
}

// testHookDialed, when set by a test, runs once a connection's upstream
// is dialled, before it is forwarded.
var testHookDialed func(p *Proxy)

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
		dst.Close()
		src.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			p.mu.Lock()
			if head := p.split; head > 0 && n > head && !p.stalled {
				p.split, p.stalled = 0, true
				p.mu.Unlock()
				if _, werr := dst.Write(buf[:head]); werr != nil {
					return
				}
				chunk = buf[head:n]
				p.mu.Lock()
			}
			if p.stalled && !p.closed {
				p.blocked++
				for p.stalled && !p.closed {
					p.cond.Wait()
				}
				p.blocked--
			}
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			if _, werr := dst.Write(chunk); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			return
		}
	}
}

// Stall stops forwarding bytes; connections stay open and new ones are
// accepted but hang.
func (p *Proxy) Stall() {
	p.mu.Lock()
	p.stalled = true
	p.mu.Unlock()
}

// SplitNext cuts the next read longer than n bytes, either way, in two:
// its first n bytes are forwarded, then the proxy stalls (as Stall) with
// the rest held back until Resume, as a network that delays the end of a
// message.
func (p *Proxy) SplitNext(n int) {
	p.mu.Lock()
	p.split = n
	p.mu.Unlock()
}

// Blocked returns how many directions of the proxied connections hold
// bytes back because of Stall: a test can tell that a request was sent
// into the stall.
func (p *Proxy) Blocked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blocked
}

// Resume undoes Stall.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.stalled = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Cut closes every open connection and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.refuse = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// Heal accepts connections again after Cut.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.refuse = false
	p.mu.Unlock()
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.cond.Broadcast()
	for c := range p.conns {
		c.Close()
	}
	p.holds.releaseAll()
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
