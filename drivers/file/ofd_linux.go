//go:build linux

package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// stateByte is the byte whose OFD write lock guards a lock file's record:
// every read-modify-write of the record happens while holding it.
const stateByte = 0

// maxFence is the largest fence granted: the holder's liveness byte is at
// offset 1+fence, which must fit an off_t.
const maxFence = math.MaxInt64 - 1

// tryLock takes an OFD write lock on the byte at off without waiting. It
// reports false when another open file description holds a conflicting lock.
func tryLock(fd int, off int64) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: off, Len: 1}
	err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EACCES):
		return false, nil
	default:
		return false, fmt.Errorf("lock byte %d: %w", off, err)
	}
}

// unlock drops this open file description's lock on the byte at off.
func unlock(fd int, off int64) error {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: io.SeekStart, Start: off, Len: 1}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk); err != nil {
		return fmt.Errorf("unlock byte %d: %w", off, err)
	}
	return nil
}

// lockedByOther reports whether another open file description holds a lock
// on the byte at off: for a liveness byte, whether its holder is alive.
func lockedByOther(fd int, off int64) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: off, Len: 1}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk); err != nil {
		return false, fmt.Errorf("test lock byte %d: %w", off, err)
	}
	return lk.Type != unix.F_UNLCK, nil
}

// lockState takes the record's guard byte, retrying without blocking in the
// kernel (so that a process stopped inside its critical section cannot hang
// this one): a few yields, then sleeps growing from 20 µs to 1 ms, until ctx
// ends or busyTimeout passes (ErrBusy).
func lockState(ctx context.Context, fd int, busyTimeout time.Duration) error {
	ok, err := tryLock(fd, stateByte)
	if ok || err != nil {
		return err
	}
	deadline := time.Now().Add(busyTimeout)
	delay := 20 * time.Microsecond
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if i < 4 {
			runtime.Gosched()
		} else {
			time.Sleep(delay)
			delay = min(2*delay, time.Millisecond)
		}
		if ok, err := tryLock(fd, stateByte); ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: another process stayed in its critical section over %v", ErrBusy, busyTimeout)
		}
	}
}

// The host's CLOCK_MONOTONIC, shared by every process of the host (in one
// time namespace) and not moved by wall-clock steps. Go's own monotonic
// clock is CLOCK_MONOTONIC too, but only differences are exposed, so the
// clock is read once by a system call and then advanced with time.Since
// (no system call). The system call is made first, so the computed time is
// never ahead of the real one: expiries written are at most a few
// microseconds early, and expiries checked look at most as much later.
var mono struct {
	once sync.Once
	base int64
	at   time.Time
	err  error
}

// monoNow returns CLOCK_MONOTONIC in nanoseconds.
func monoNow() (int64, error) {
	mono.once.Do(func() {
		var ts unix.Timespec
		mono.err = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		mono.at = time.Now()
		mono.base = ts.Nano()
	})
	if mono.err != nil {
		return 0, fmt.Errorf("clock_gettime: %w", mono.err)
	}
	return mono.base + int64(time.Since(mono.at)), nil
}

// addTTL returns now+ttl, saturating instead of overflowing.
func addTTL(now int64, ttl time.Duration) int64 {
	if int64(ttl) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(ttl)
}
