package postgres

import (
	"crypto/tls"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// watcher notices, without reading from it, that the server closed a pinned
// connection (pg_terminate_backend, shutdown, crash): it polls a duplicate
// of the socket for POLLRDHUP in its own goroutine, so that the locks on
// the connection are reported lost at once rather than at the next probe.
type watcher struct {
	stopOnce sync.Once
	stopCh   chan struct{}
	wake     [2]int // pipe: writing to wake[1] ends the poll
	done     chan struct{}
}

// startWatch watches c. When the peer closes, it calls onBreak, then waits
// for the statement slot sem (or stop) and calls closeConn. A connection
// whose descriptor cannot be had is not watched (probes still find the
// break).
func startWatch(c net.Conn, sem chan struct{}, onBreak, closeConn func()) *watcher {
	w := &watcher{stopCh: make(chan struct{}), done: make(chan struct{}), wake: [2]int{-1, -1}}
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		close(w.done)
		return w
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		close(w.done)
		return w
	}
	fd := -1
	if err := rc.Control(func(s uintptr) { fd, err = unix.Dup(int(s)) }); err != nil || fd < 0 {
		close(w.done)
		return w
	}
	unix.CloseOnExec(fd)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		unix.Close(fd)
		close(w.done)
		return w
	}
	w.wake = p
	go w.run(fd, sem, onBreak, closeConn)
	return w
}

func (w *watcher) run(fd int, sem chan struct{}, onBreak, closeConn func()) {
	defer close(w.done)
	defer w.closePipe() // a broken session's watcher may never be stopped
	defer unix.Close(fd)
	fds := []unix.PollFd{
		{Fd: int32(fd), Events: unix.POLLRDHUP},
		{Fd: int32(w.wake[0]), Events: unix.POLLIN},
	}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
			break
		}
	}
	onBreak()
	select {
	case sem <- struct{}{}:
		closeConn()
		<-sem
	case <-w.stopCh:
	}
}

// stop ends the watcher and waits for its goroutine. Idempotent.
func (w *watcher) stop() {
	w.stopOnce.Do(func() {
		close(w.stopCh)
		pipeMu.Lock()
		if w.wake[1] >= 0 { // (closed once run has ended)
			_, _ = unix.Write(w.wake[1], []byte{0})
		}
		pipeMu.Unlock()
	})
	<-w.done
	w.closePipe()
}

var pipeMu sync.Mutex

func (w *watcher) closePipe() {
	pipeMu.Lock()
	defer pipeMu.Unlock()
	for i, f := range w.wake {
		if f >= 0 {
			unix.Close(f)
			w.wake[i] = -1
		}
	}
}
