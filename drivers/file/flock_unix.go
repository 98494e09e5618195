//go:build linux || darwin || dragonfly || freebsd || openbsd

package file

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// flocker is the locker of MechanismFlock. flock(2) locks a whole file, per
// open file description, so the guard is an exclusive flock on the lock
// file itself and the liveness lock lives in a file of its own, one per
// fence: the lock file's path followed by "." and 1+fence. The holder keeps
// it open with an exclusive flock; a process testing liveness takes a
// shared flock, which fails while the holder lives, and which testers never
// deny each other. A liveness file is deleted once its holder is gone (its
// release, or the acquisition taking its lock over); the file of an expired
// but hung holder is deleted too, the hung process keeping its flock on a
// file no one looks at any more. On Linux the guard also takes the guard
// of MechanismOFD (see guardOFD).
type flocker struct{ mode uint32 }

// tryGuard takes the flock of the lock file, then, on Linux, the guard of
// MechanismOFD too (guardOFD), so that the two mechanisms' guards exclude
// each other.
func (flocker) tryGuard(fd int) (bool, error) {
	switch err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); {
	case err == nil:
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, nil
	default:
		return false, fmt.Errorf("flock lock file: %w", err)
	}
	ok, err := guardOFD(fd)
	if !ok || err != nil {
		_ = unix.Flock(fd, unix.LOCK_UN)
	}
	return ok, err
}

func (flocker) unguard(fd int) error {
	err := unguardOFD(fd)
	if uerr := unix.Flock(fd, unix.LOCK_UN); uerr != nil {
		return fmt.Errorf("unlock lock file: %w", uerr)
	}
	return err
}

func (flocker) mark() byte { return markFlock }

// livePath is the path of the liveness file live of the lock file at path.
func livePath(path string, live int64) string {
	return path + "." + strconv.FormatInt(live, 10)
}

func (f flocker) hold(_ int, path string, live int64) (int, error) {
	p := livePath(path, live)
	// read-only: closing it is no close-after-write for the directory's watchers
	lf, err := unix.Open(p, unix.O_RDONLY|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, f.mode)
	if err != nil {
		return -1, fmt.Errorf("open liveness file %s: %w", p, err)
	}
	if err := unix.Flock(lf, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = unix.Close(lf)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return -1, fmt.Errorf("mutexfx/file: liveness file %s unexpectedly locked by another process", p)
		}
		return -1, fmt.Errorf("flock liveness file %s: %w", p, err)
	}
	return lf, nil
}

func (flocker) alive(_ int, path string, live int64) (bool, error) {
	p := livePath(path, live)
	lf, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENOENT) {
		return false, nil // its holder released or was taken over
	}
	if err != nil {
		return false, fmt.Errorf("open liveness file %s: %w", p, err)
	}
	defer unix.Close(lf)
	switch err := unix.Flock(lf, unix.LOCK_SH|unix.LOCK_NB); {
	case err == nil:
		return false, nil // closing lf drops the shared lock
	case errors.Is(err, unix.EWOULDBLOCK):
		return true, nil
	default:
		return false, fmt.Errorf("test liveness file %s: %w", p, err)
	}
}

func (flocker) forget(path string, live int64) { _ = unix.Unlink(livePath(path, live)) }

// forgetLost deletes the liveness file live only when it is still kept, the
// file the holder keeps open: a file of the same name may be another
// holder's, in the directory created anew.
func (flocker) forgetLost(kept int, path string, live int64) {
	p := livePath(path, live)
	if same, err := sameFile(kept, p); err == nil && same {
		_ = unix.Unlink(p)
	}
}
