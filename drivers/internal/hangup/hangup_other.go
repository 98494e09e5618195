//go:build !linux

package hangup

import "syscall"

// Watcher watches nothing outside Linux: a connection its peer closed is
// found by the driver's next probe or renewal.
type Watcher struct{}

// Arm does nothing outside Linux.
func (*Watcher) Arm(*Conn, syscall.Conn, func()) {}

// ArmPeek does nothing outside Linux.
func (*Watcher) ArmPeek(*Conn, syscall.Conn, func(), func(byte) bool) {}

// Disarm does nothing outside Linux.
func (*Watcher) Disarm(*Conn) {}

// Forget does nothing outside Linux.
func (*Watcher) Forget(*Conn) {}

// Close does nothing outside Linux.
func (*Watcher) Close() {}
