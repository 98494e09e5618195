//go:build linux

package file

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// stateByte is the byte whose OFD write lock guards a lock file's record:
// every read-modify-write of the record happens while holding it.
const stateByte = 0

// ofd is the locker of MechanismOFD: the guard is an open-file-description
// write lock on byte 0 of the lock file, the liveness lock one on byte
// 1+fence, both on the holder's one descriptor.
type ofd struct{}

func (ofd) tryGuard(fd int) (bool, error) { return tryLock(fd, stateByte) }
func (ofd) unguard(fd int) error          { return unlock(fd, stateByte) }
func (ofd) forget(string, int64)          {}
func (ofd) forgetLost(int, string, int64) {}
func (ofd) mark() byte                    { return markOFD }

func (ofd) hold(fd int, _ string, live int64) (int, error) {
	ok, err := tryLock(fd, live)
	if err == nil && !ok {
		err = fmt.Errorf("mutexfx/file: liveness byte %d unexpectedly locked by another process", live)
	}
	return -1, err
}

func (ofd) alive(fd int, _ string, live int64) (bool, error) { return lockedByOther(fd, live) }

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
