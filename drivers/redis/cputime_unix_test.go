//go:build unix

package redis

import (
	"syscall"
	"testing"
	"time"
)

// processCPU returns the CPU time (user and system) the process has used
// so far, all its threads counted.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
