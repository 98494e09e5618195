//go:build unix

package component_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) this process has used
// so far, all threads counted: a cost measure that time spent waiting for
// a CPU on a loaded machine does not inflate.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
