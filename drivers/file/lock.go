//go:build linux || darwin || dragonfly || freebsd || openbsd || windows

package file

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/internal/backoff"
)

// maxFence is the largest fence granted: the holder's liveness byte is at
// offset 1+fence, which must fit an off_t.
const maxFence = math.MaxInt64 - 1

// locker is the kernel lock mechanism of a driver (see Mechanism): the guard
// that serialises the read-modify-write of a lock file's record, and the
// liveness lock a holder keeps while it holds, which the kernel drops when
// the holder's descriptors are closed (by Release, Close or the death of
// its process). Both are locks of open file descriptions, so that two
// drivers of one process exclude each other as two processes do.
type locker interface {
	// tryGuard takes the guard of the lock file open at fd without
	// waiting; false: another description holds it.
	tryGuard(fd handle) (bool, error)
	// unguard drops the guard taken by tryGuard on fd.
	unguard(fd handle) error
	// hold takes the liveness lock live of the lock file at path, open at
	// fd (held under the guard). It returns a further descriptor the
	// holder keeps open with fd, or noHandle.
	hold(fd handle, path string, live int64) (handle, error)
	// alive reports whether a holder keeps liveness lock live of the lock
	// file at path, open at fd.
	alive(fd handle, path string, live int64) (bool, error)
	// forget clears what liveness lock live left behind once its holder
	// is gone (released, taken over); under the guard.
	forget(path string, live int64)
	// forgetLost clears what liveness lock live left behind when it is
	// still that of the descriptor kept (hold's), of a holder whose lock
	// file was lost (deleted, replaced, its directory moved): no
	// acquisition of the file at path will clear it.
	forgetLost(kept handle, path string, live int64)
	// mark is the record's mechanism byte.
	mark() byte
}

// guardBackoff is the delays of a wait for a record's guard: the one retry
// policy, on the scale of the few-microsecond critical section it guards.
var guardBackoff = backoff.Policy{Start: 20 * time.Microsecond, Cap: time.Millisecond}

// lockState takes the record's guard byte, retrying without blocking in the
// kernel (so that a process stopped inside its critical section cannot hang
// this one): a few yields, then sleeps of guardBackoff (20 µs doubling to
// 1 ms), until ctx ends or busyTimeout passes (ErrBusy).
func lockState(ctx context.Context, lk locker, fd handle, busyTimeout time.Duration) error {
	ok, err := lk.tryGuard(fd)
	if ok || err != nil {
		return err
	}
	deadline := time.Now().Add(busyTimeout)
	retry := guardBackoff.New()
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if i < 4 {
			runtime.Gosched()
		} else {
			time.Sleep(retry.Next())
		}
		if ok, err := lk.tryGuard(fd); ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: another process stayed in its critical section over %v", ErrBusy, busyTimeout)
		}
	}
}

// The host's monotonic clock (hostClock: CLOCK_MONOTONIC; CLOCK_UPTIME_RAW
// on macOS; the performance counter on Windows), shared by every process of
// the host (in one time namespace) and not moved by wall-clock steps. Go's
// own monotonic clock is that clock too, but only differences are exposed,
// so the clock is read once by a system call and then advanced with
// time.Since (no system call). The clock is read between two readings of Go's clock,
// taken again (up to syncTries times) until they are at most syncGap
// apart, and counted from the second: the computed time is never ahead of
// the real one, and behind it by at most syncGap (unless every try took
// longer: then by the shortest). A process preempted between the readings
// would otherwise be behind by the preemption, its expiries written that
// much early, and another's expiries read as that much later.
var mono struct {
	once sync.Once
	base int64
	at   time.Time
	err  error
}

// syncGap and syncTries bound how far behind the host's clock monoNow is.
const (
	syncGap   = 20 * time.Microsecond
	syncTries = 100
)

// monoNow returns the host's monotonic clock (see hostClock) in nanoseconds.
func monoNow() (int64, error) {
	mono.once.Do(func() {
		gap := time.Duration(math.MaxInt64)
		for range syncTries {
			before := time.Now()
			base, err := hostClock()
			at := time.Now()
			if err != nil {
				mono.err = err
				return
			}
			if d := at.Sub(before); d < gap {
				gap, mono.base, mono.at = d, base, at
			}
			if gap <= syncGap {
				return
			}
		}
	})
	if mono.err != nil {
		return 0, mono.err
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
