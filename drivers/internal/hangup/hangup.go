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

// Conn is a connection's registration with a Watcher, kept for the
// connection's life, so that arming it again, while no hang-up fired,
// costs no system call. The zero value is unregistered. A Conn belongs to
// one Watcher, which guards it; call Forget before closing its connection.
type Conn struct {
	id    uint64          // 0: not registered
	onHup func()          // nil: not armed
	peek  func(byte) bool // ArmPeek's end, nil: hang-ups only
	fired bool            // the one-shot registration fired: enabled again to arm
	sc    syscall.Conn
}
