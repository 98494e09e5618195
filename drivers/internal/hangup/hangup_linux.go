//go:build linux

package hangup

import (
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Watcher watches connections for their peer's hang-up (see the package
// documentation). The zero value is ready: its goroutine starts at the
// first Arm and ends with Close.
//
// The connections are registered as they are (no duplicate descriptor), so
// that closing one still sends its FIN at once, and the kernel drops the
// registration with it. Each registration is one-shot and carries an id,
// never the descriptor's number, which a later connection may reuse.
type Watcher struct {
	mu   sync.Mutex
	epfd int // valid once started, -1 after close
	// started is set at the first arm that set up epoll (an epoll
	// descriptor may be 0 when the program closed its stdin).
	started bool
	wake    int // eventfd that ends the loop (id 0)
	byID    map[uint64]*Conn
	nextID  uint64
	broken  bool // epoll could not be set up: nothing is watched
	closed  bool
	wg      sync.WaitGroup
}

func (w *Watcher) arm(c *Conn, onHup func(), peek func(byte) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || !w.startLocked() {
		return
	}
	op := unix.EPOLL_CTL_MOD
	switch {
	case c.id == 0:
		op = unix.EPOLL_CTL_ADD
		w.nextID++
		c.id = w.nextID
		w.byID[c.id] = c
	case !c.fired && peek == nil && c.peek == nil:
		c.onHup = onHup
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLONESHOT} // (EPOLLHUP, EPOLLERR: always)
	if peek != nil {
		ev.Events |= unix.EPOLLIN
	}
	ev.Fd, ev.Pad = int32(uint32(c.id)), int32(uint32(c.id>>32))
	if err := control(c.sc, func(fd int) error { return unix.EpollCtl(w.epfd, op, fd, &ev) }); err != nil {
		w.forgetLocked(c) // closed under us: its users find it so
		return
	}
	c.fired, c.onHup, c.peek = false, onHup, peek
}

func (w *Watcher) disarm(c *Conn) {
	w.mu.Lock()
	c.onHup = nil
	w.mu.Unlock()
}

func (w *Watcher) forget(c *Conn) {
	w.mu.Lock()
	w.forgetLocked(c)
	w.mu.Unlock()
}

func (w *Watcher) forgetLocked(c *Conn) {
	if c.id != 0 {
		delete(w.byID, c.id)
	}
	c.id, c.onHup, c.peek, c.fired = 0, nil, nil, false // (w and sc stay: read unlocked)
}

// startLocked starts the loop at the first arm; false when epoll cannot be
// had.
func (w *Watcher) startLocked() bool {
	if w.started {
		return w.epfd >= 0
	}
	if w.broken {
		return false
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		w.broken = true
		return false
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		w.broken = true
		return false
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN} // id 0
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &ev); err != nil {
		unix.Close(wake)
		unix.Close(epfd)
		w.broken = true
		return false
	}
	w.epfd, w.wake, w.started = epfd, wake, true
	w.byID = map[uint64]*Conn{}
	w.wg.Add(1)
	go w.run(epfd)
	return true
}

// run waits for hang-ups until Close.
func (w *Watcher) run(epfd int) {
	defer w.wg.Done()
	evs := make([]unix.EpollEvent, 32)
	var fns []func()
	for {
		n, err := unix.EpollWait(epfd, evs, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		stop := false
		w.mu.Lock()
		for _, ev := range evs[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				stop = true
				continue
			}
			c := w.byID[id]
			if c == nil { // closed since
				continue
			}
			c.fired = true
			if ev.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) == 0 && !w.peekEndsLocked(c) {
				continue
			}
			if c.onHup != nil {
				fns = append(fns, c.onHup)
				c.onHup = nil
			}
		}
		w.mu.Unlock()
		for i, fn := range fns {
			fn()
			fns[i] = nil
		}
		fns = fns[:0]
		if stop {
			return
		}
	}
}

// peekEndsLocked looks at the first byte waiting on c, readable while
// armed by ArmPeek: whether it ends the session. When it does not, c is
// armed again for hang-ups only.
func (w *Watcher) peekEndsLocked(c *Conn) bool {
	peek := c.peek
	if peek == nil {
		return false
	}
	ends := true
	_ = control(c.sc, func(fd int) error {
		var b [1]byte
		for {
			n, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			switch {
			case err == unix.EINTR:
				continue
			case err == unix.EAGAIN:
				ends = false // read meanwhile
			case err == nil && n == 1:
				ends = peek(b[0])
			}
			return nil
		}
	})
	if !ends {
		c.peek = nil
		ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLONESHOT}
		ev.Fd, ev.Pad = int32(uint32(c.id)), int32(uint32(c.id>>32))
		if control(c.sc, func(fd int) error { return unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, fd, &ev) }) == nil {
			c.fired = false
		}
	}
	return ends
}

// Close ends the loop and waits for it: nothing is armed any more.
func (w *Watcher) Close() {
	w.mu.Lock()
	w.closed = true
	started := w.started && w.epfd >= 0
	if started {
		_, _ = unix.Write(w.wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	}
	w.mu.Unlock()
	if !started {
		return
	}
	w.wg.Wait()
	w.mu.Lock()
	unix.Close(w.wake)
	unix.Close(w.epfd)
	w.epfd, w.wake = -1, -1
	clear(w.byID)
	w.mu.Unlock()
}

// control runs f with sc's descriptor.
func control(sc syscall.Conn, f func(fd int) error) error {
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
