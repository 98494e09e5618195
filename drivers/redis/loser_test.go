package redis

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// fault is what a loser does to a request holding its marker.
type fault int

const (
	// loseReply forwards the request (the server runs it) and drops its
	// reply.
	loseReply fault = iota
	// loseRequest drops the request (the server never sees it).
	loseRequest
)

// loser is a TCP proxy to a Redis server that loses commands, as a link
// reset at the wrong moment would: after lose(marker, faults...), each of
// the next requests whose bytes hold marker is handled by the next fault,
// and its connection closed (the client sees EOF). Other requests, and all
// of them once the faults are spent, pass. Commands are small (EVALSHA of
// a loaded script), so a request is one read.
type loser struct {
	addr   string
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu     sync.Mutex
	marker string
	faults []fault
	conns  map[net.Conn]struct{}
	closed bool
}

// newLoser starts a loser to target, closed at the end of the test.
func newLoser(t *testing.T, target string) *loser {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &loser{addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// lose arms the faults for the requests holding marker.
func (p *loser) lose(marker string, faults ...fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marker, p.faults = marker, faults
}

// spent reports whether every armed fault happened.
func (p *loser) spent() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.faults) == 0
}

// next returns the fault for a request, if it is to be lost.
func (p *loser) next(req []byte) (fault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.faults) == 0 || !strings.Contains(string(req), p.marker) {
		return 0, false
	}
	f := p.faults[0]
	p.faults = p.faults[1:]
	return f, true
}

func (p *loser) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		var dropReply atomic.Bool
		p.wg.Add(2)
		go p.pipe(c, up, func(b []byte) bool { // requests
			f, lost := p.next(b)
			if lost && f == loseReply {
				dropReply.Store(true)
				return true
			}
			return !lost
		})
		go p.pipe(up, c, func([]byte) bool { return !dropReply.Load() }) // replies
	}
}

// pipe copies src to dst while pass accepts what it reads; then it closes
// both.
func (p *loser) pipe(src, dst net.Conn, pass func([]byte) bool) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
		src.Close()
		dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !pass(buf[:n]) {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *loser) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// loadScripts loads the driver's scripts on c's server, so that a command
// through a loser is one EVALSHA (not a NOSCRIPT reply, then EVAL).
func loadScripts(t *testing.T, c goredis.UniversalClient) {
	t.Helper()
	for _, s := range []*goredis.Script{acquireScript, releaseScript, leaveScript, handoverScript, extendScript, inspectScript} {
		if err := s.Load(context.Background(), c).Err(); err != nil {
			t.Fatal(err)
		}
	}
}
