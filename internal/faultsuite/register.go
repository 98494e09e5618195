//go:build linux

package faultsuite

import (
	"bufio"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Register is the fenced register the holders write to: per lock it
// remembers the highest fence written and refuses a lower one (an equal
// one is taken, as a store that refuses only older fences would). It
// records every write in its own order (Seq). Children reach it over a
// unix socket; in-process workers call Write.
type Register struct {
	path string
	ln   net.Listener
	emit func(Event)
	wg   sync.WaitGroup

	mu     sync.Mutex
	max    map[string]uint64
	seq    int64
	conns  map[net.Conn]struct{}
	closed bool
}

// Writer is where a holder writes under its fence.
type Writer interface {
	// Write asks to write to lock's data under fence; it reports whether
	// the register took the write.
	Write(lock string, fence uint64, holder string) (bool, error)
}

var _ Writer = (*Register)(nil)

// NewRegister listens on a unix socket in dir; emit gets every write.
func NewRegister(dir string, emit func(Event)) (*Register, error) {
	path := filepath.Join(dir, "register.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("faultsuite: register: %w", err)
	}
	r := &Register{path: path, ln: ln, emit: emit, max: map[string]uint64{}, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Path is the register's socket.
func (r *Register) Path() string { return r.path }

// Write implements Writer in process.
func (r *Register) Write(lock string, fence uint64, holder string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok := fence >= r.max[lock]
	if ok {
		r.max[lock] = fence
	}
	r.seq++
	r.emit(Event{T: Now(), Kind: Write, Holder: holder, Lock: lock, Fence: fence, OK: ok, Seq: r.seq})
	return ok, nil
}

func (r *Register) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			c.Close()
			return
		}
		r.conns[c] = struct{}{}
		r.mu.Unlock()
		r.wg.Add(1)
		go r.handle(c)
	}
}

// handle serves one connection: lines "lock fence holder", answers "1"
// (taken) or "0" (refused).
func (r *Register) handle(c net.Conn) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		delete(r.conns, c)
		r.mu.Unlock()
		c.Close()
	}()
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			return
		}
		fence, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return
		}
		ok, _ := r.Write(f[0], fence, f[2])
		reply := "0\n"
		if ok {
			reply = "1\n"
		}
		if _, err := c.Write([]byte(reply)); err != nil {
			return
		}
	}
}

// Close stops the register and waits for its goroutines.
func (r *Register) Close() {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.ln.Close()
	r.wg.Wait()
}

// registerClient is a child's connection to the register.
type registerClient struct {
	c net.Conn
	r *bufio.Reader
}

var _ Writer = (*registerClient)(nil)

func dialRegister(path string) (*registerClient, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, fmt.Errorf("faultsuite: dial register: %w", err)
	}
	return &registerClient{c: c, r: bufio.NewReader(c)}, nil
}

func (rc *registerClient) Write(lock string, fence uint64, holder string) (bool, error) {
	if _, err := fmt.Fprintf(rc.c, "%s %d %s\n", lock, fence, holder); err != nil {
		return false, err
	}
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return false, err
	}
	return line == "1\n", nil
}

func (rc *registerClient) Close() error { return rc.c.Close() }
