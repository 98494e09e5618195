// Package hangup tells a driver, at once and without reading from it, that
// the peer of a connection it pins closed or reset it (a killed session, a
// server shut down, a reset link): a store frees a session's locks the
// moment the session ends, so their holders must be told then, not at the
// next probe.
//
// One goroutine per Watcher waits, in epoll on Linux, for the hang-ups of
// the connections armed (EPOLLRDHUP, EPOLLHUP, EPOLLERR; readiness to read
// is asked only by ArmPeek, so that the replies to the connection's own
// statements never wake it) and calls the function armed. Elsewhere a
// Watcher watches nothing, and a driver's probes find broken connections.
package hangup

import "syscall"

// Conn is a connection's registration with a Watcher (Watch), kept for
// the connection's life, so that arming it again, while no hang-up fired,
// costs no system call. Its zero value, or one watching a nil socket,
// watches nothing. Its Watcher guards it; call Forget before closing its
// connection.
type Conn struct {
	w     *Watcher
	sc    syscall.Conn
	id    uint64          // 0: not registered
	onHup func()          // nil: not armed
	peek  func(byte) bool // ArmPeek's end, nil: hang-ups only
	fired bool            // the one-shot registration fired: enabled again to arm
}

// Watch makes c watch sc with w, before c is armed.
func (c *Conn) Watch(w *Watcher, sc syscall.Conn) { c.w, c.sc = w, sc }

// Arm calls onHup once when the peer closes or resets the connection,
// unless Disarm or Forget comes first. A hang-up that came while c was not
// armed calls it at once. Where epoll is not available, or the socket has
// no descriptor, it does nothing.
func (c *Conn) Arm(onHup func()) {
	if c.w != nil && c.sc != nil {
		c.w.arm(c, onHup, nil)
	}
}

// ArmPeek is Arm that also watches for bytes the peer sends unasked: the
// first byte is peeked at (never read), and onHup is called when end says
// that it ends the session (a store that says so before it closes), or at
// the end of the stream. Bytes that do not end it leave c watched for
// hang-ups only. Arm it while no statement runs on the connection (whose
// reply would wake it), and Disarm it, or Arm it for hang-ups only,
// before the next.
func (c *Conn) ArmPeek(onHup func(), end func(first byte) bool) {
	if c.w != nil && c.sc != nil {
		c.w.arm(c, onHup, end)
	}
}

// Disarm forgets c's function: its connection holds nothing to lose now.
func (c *Conn) Disarm() {
	if c.w != nil {
		c.w.disarm(c)
	}
}

// Forget drops c's registration: its connection is being closed (the
// kernel drops it from epoll with its descriptor).
func (c *Conn) Forget() {
	if c.w != nil {
		c.w.forget(c)
	}
}
