//go:build !linux

package mysql

// hangups does nothing outside Linux: a connection the server closed is
// found by the next probe (every ProbeInterval) or renewal.
type hangups struct{}

type hangupState struct{}

func (*hangups) arm(*socket, func()) {}
func (*hangups) disarm(*socket)      {}
func (*hangups) forget(*socket)      {}
func (*hangups) close()              {}
