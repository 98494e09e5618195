//go:build linux

package mysql

import (
	"sync"

	"golang.org/x/sys/unix"
)

// hangups notices, without reading from them, that the server closed or
// reset the connections holding advisory locks (KILL CONNECTION, a reset
// link, a shutdown): the server frees a connection's GET_LOCKs the moment
// it ends, so its holders must be told then, not at the next probe. One
// goroutine per driver waits, in epoll, for each such socket's hang-up
// (EPOLLRDHUP, EPOLLHUP, EPOLLERR: readiness to read is not asked, so
// the replies to the connection's own statements never wake it) and
// calls the function armed on the socket, which reports its lock lost.
//
// The sockets are registered as they are (no duplicate descriptor), so
// that closing one still sends its FIN at once, and the kernel drops the
// registration with it. Each registration is one-shot and carries an id,
// never the descriptor's number, which a later socket may reuse.
type hangups struct {
	mu     sync.Mutex
	epfd   int // 0 until the first arm, -1 after close
	wake   int // eventfd that ends the loop (id 0)
	byID   map[uint64]*socket
	nextID uint64
	broken bool // epoll could not be set up: nothing is watched
	closed bool
	wg     sync.WaitGroup
}

// hangupState is a socket's registration, guarded by hangups.mu.
type hangupState struct {
	id    uint64 // 0: not registered
	onHup func() // nil: no lock on the connection
	fired bool   // the one-shot registration fired: enable it again to arm
}

// arm calls onHup once when s's peer closes or resets the connection,
// unless disarm or forget comes first. A hang-up that came before arm
// (while the connection held nothing) calls it at once. Where epoll is
// not available, it does nothing: the probes find the lock lost.
func (hs *hangups) arm(s *socket, onHup func()) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.closed || !hs.startLocked() {
		return
	}
	st := &s.hup
	op := unix.EPOLL_CTL_MOD
	switch {
	case st.id == 0:
		op = unix.EPOLL_CTL_ADD
		hs.nextID++
		st.id = hs.nextID
		hs.byID[st.id] = s
	case !st.fired:
		st.onHup = onHup
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLONESHOT} // (EPOLLHUP, EPOLLERR: always)
	ev.Fd, ev.Pad = int32(uint32(st.id)), int32(uint32(st.id>>32))
	err := s.control(func(fd int) error { return unix.EpollCtl(hs.epfd, op, fd, &ev) })
	if err != nil { // closed under us: the statements find it so
		hs.forgetLocked(s)
		return
	}
	st.fired = false
	st.onHup = onHup
}

// disarm forgets s's function: its connection holds no lock any more.
func (hs *hangups) disarm(s *socket) {
	hs.mu.Lock()
	s.hup.onHup = nil
	hs.mu.Unlock()
}

// forget drops s's registration: it is being closed (the kernel drops it
// from epoll with its descriptor).
func (hs *hangups) forget(s *socket) {
	hs.mu.Lock()
	hs.forgetLocked(s)
	hs.mu.Unlock()
}

func (hs *hangups) forgetLocked(s *socket) {
	if s.hup.id != 0 {
		delete(hs.byID, s.hup.id)
	}
	s.hup = hangupState{}
}

// startLocked starts the loop at the first arm; false when epoll cannot be
// had.
func (hs *hangups) startLocked() bool {
	if hs.epfd > 0 {
		return true
	}
	if hs.broken {
		return false
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		hs.broken = true
		return false
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		hs.broken = true
		return false
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN} // id 0
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &ev); err != nil {
		unix.Close(wake)
		unix.Close(epfd)
		hs.broken = true
		return false
	}
	hs.epfd, hs.wake = epfd, wake
	hs.byID = map[uint64]*socket{}
	hs.wg.Add(1)
	go hs.run(epfd)
	return true
}

// run waits for hang-ups until close.
func (hs *hangups) run(epfd int) {
	defer hs.wg.Done()
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
		hs.mu.Lock()
		for _, ev := range evs[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				stop = true
				continue
			}
			s := hs.byID[id]
			if s == nil { // closed since
				continue
			}
			s.hup.fired = true
			if s.hup.onHup != nil {
				fns = append(fns, s.hup.onHup)
				s.hup.onHup = nil
			}
		}
		hs.mu.Unlock()
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

// close ends the loop and waits for it: nothing is armed any more.
func (hs *hangups) close() {
	hs.mu.Lock()
	hs.closed = true
	started := hs.epfd > 0
	if started {
		_, _ = unix.Write(hs.wake, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	}
	hs.mu.Unlock()
	if !started {
		return
	}
	hs.wg.Wait()
	hs.mu.Lock()
	unix.Close(hs.wake)
	unix.Close(hs.epfd)
	hs.epfd, hs.wake = -1, -1
	clear(hs.byID)
	hs.mu.Unlock()
}

// control runs f with s's descriptor.
func (s *socket) control(f func(fd int) error) error {
	rc, err := s.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
