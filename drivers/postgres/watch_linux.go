package postgres

import (
	"crypto/tls"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// watcher notices, without reading from it, that the server ended a pinned
// connection (pg_terminate_backend, shutdown, crash, a reset link), so that
// the locks on the connection are reported lost at once rather than at the
// next probe. It polls a duplicate of the socket in its own goroutine for
// a hang-up (POLLRDHUP), and for bytes the session did not ask for
// (POLLIN while no statement runs, looked at with MSG_PEEK, never read):
// a terminated backend sends its FATAL ErrorResponse before it releases
// its locks, and closes the socket only when its process exits, after —
// so the ErrorResponse is the one signal that comes before another session
// can be granted the locks.
//
// POLLIN also comes with every statement's reply: the watcher then takes
// the statement slot if it is free (never waiting for it, so that no
// statement waits for the watcher) and looks, the session idle; when a
// statement holds the slot, it watches only for hang-ups for minBusy,
// doubling up to maxBusy while the session stays busy, and looks again.
// Bytes other than an ErrorResponse arriving on an idle session (a notice,
// a parameter status) are left for pgx, and the watcher watches only for
// hang-ups from then on.
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
		{Fd: int32(fd), Events: unix.POLLRDHUP | unix.POLLIN},
		{Fd: int32(w.wake[0]), Events: unix.POLLIN},
	}
	slot := false               // the watcher holds the statement slot
	peek := true                // POLLIN is watched (see above)
	busy := time.Duration(0)    // > 0: hang-ups only, for that long
	backoff := time.Duration(0) // the last busy wait, doubled while busy
	for !slot {
		// While a statement runs, its reply is pending: hang-ups only,
		// for busy, then look again.
		fds[0].Events = unix.POLLRDHUP
		timeout := -1
		if peek && busy == 0 {
			fds[0].Events |= unix.POLLIN
		} else if peek {
			timeout = int(busy.Milliseconds())
		}
		fds[0].Revents, fds[1].Revents = 0, 0
		n, err := unix.Poll(fds, timeout)
		if err == unix.EINTR {
			continue
		}
		if err != nil || fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
			break
		}
		if n == 0 { // the busy wait ended
			busy = 0
			continue
		}
		if fds[0].Revents&unix.POLLIN == 0 {
			continue
		}
		select { // never waits: a statement is not delayed by the watcher
		case sem <- struct{}{}:
		default:
			backoff = min(max(2*backoff, minBusy), maxBusy)
			busy = backoff
			continue
		}
		backoff = 0
		switch unsolicited(fd) {
		case peekNothing: // (the reply was read meanwhile)
			<-sem
		case peekOther:
			<-sem
			peek = false
		case peekEnd:
			slot = true
		}
	}
	onBreak()
	if !slot {
		select {
		case sem <- struct{}{}:
		case <-w.stopCh:
			return
		}
	}
	closeConn()
	<-sem
}

// How long the watcher watches only for hang-ups when it found the
// session busy (its first look after that may come this late).
const (
	minBusy = time.Millisecond
	maxBusy = 16 * time.Millisecond
)

// What an idle session's socket holds.
const (
	peekNothing = iota
	peekOther   // bytes that are not an ErrorResponse
	peekEnd     // an ErrorResponse (the server ends the session), the end of the stream, or an error
)

// unsolicited looks, without reading it, at what the server sent on fd
// while no statement runs.
func unsolicited(fd int) int {
	var b [1]byte
	for {
		n, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return peekNothing
		case err != nil, n == 0, b[0] == 'E':
			return peekEnd
		default:
			return peekOther
		}
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
