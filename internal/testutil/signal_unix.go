//go:build unix

package testutil

import "syscall"

// The signals that freeze and thaw a server's process (Pause, Resume).
const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)
