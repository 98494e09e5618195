//go:build !linux

package hangup

// Watcher watches nothing outside Linux: a connection its peer closed is
// found by the driver's next probe or renewal.
type Watcher struct{}

func (*Watcher) arm(*Conn, func(), func(byte) bool) {}
func (*Watcher) disarm(*Conn)                       {}
func (*Watcher) forget(*Conn)                       {}

// Close does nothing outside Linux.
func (*Watcher) Close() {}
