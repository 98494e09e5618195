package file

import "golang.org/x/sys/unix"

// hostClockID is the clock of hostClock: on macOS CLOCK_UPTIME_RAW
// (mach_absolute_time), the clock of Go's runtime, which stops while the
// machine sleeps. CLOCK_MONOTONIC counts the sleep there, and monoNow
// advances its first reading with Go's clock: processes started before and
// after a sleep would then disagree by its length.
const hostClockID = unix.CLOCK_UPTIME_RAW
