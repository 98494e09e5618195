//go:build linux || dragonfly || freebsd || openbsd

package file

import "golang.org/x/sys/unix"

// hostClockID is the clock of hostClock: CLOCK_MONOTONIC, the clock of Go's
// runtime on these systems.
const hostClockID = unix.CLOCK_MONOTONIC
