//go:build !unix

package testutil

import "syscall"

// Processes cannot be frozen here: signalling them fails (the module is
// vetted for Windows; its store tests run on Linux).
const (
	sigStop = syscall.Signal(0x13)
	sigCont = syscall.Signal(0x12)
)
