package file

import (
	"errors"
	"fmt"

	"golang.org/x/sys/windows"
)

// guardOff is the byte whose exclusive LockFileEx lock guards a lock file's
// record. Windows byte-range locks are mandatory (a range locked through
// one handle cannot be read or written through another), so the guard and
// the liveness bytes (1+fence) lie far past the record, which every handle
// reads without locks.
const guardOff = 1 << 62

// lockFileEx is the locker of MechanismLockFile: the layout of
// MechanismOFD, with LockFileEx locks of the holder's handle, which Windows
// drops when the handle is closed or its process ends.
type lockFileEx struct{}

func (lockFileEx) tryGuard(h handle) (bool, error) {
	return lockByte(h, guardOff, windows.LOCKFILE_EXCLUSIVE_LOCK)
}

func (lockFileEx) unguard(h handle) error           { return unlockByte(h, guardOff) }
func (lockFileEx) forget(string, int64)             {}
func (lockFileEx) forgetLost(handle, string, int64) {}
func (lockFileEx) mark() byte                       { return markLockFile }

func (lockFileEx) hold(h handle, _ string, live int64) (handle, error) {
	if live >= guardOff {
		return noHandle, errors.New("mutexfx/file: fence exhausted")
	}
	ok, err := lockByte(h, live, windows.LOCKFILE_EXCLUSIVE_LOCK)
	if err == nil && !ok {
		err = fmt.Errorf("mutexfx/file: liveness byte %d unexpectedly locked by another process", live)
	}
	return noHandle, err
}

// alive takes a shared lock on the liveness byte for an instant: testers
// never deny each other, and fail while the holder's exclusive lock lasts.
func (lockFileEx) alive(h handle, _ string, live int64) (bool, error) {
	ok, err := lockByte(h, live, 0)
	if err != nil || !ok {
		return !ok && err == nil, err
	}
	return false, unlockByte(h, live)
}

// lockByte locks the byte at off through h without waiting (shared unless
// flags has LOCKFILE_EXCLUSIVE_LOCK); false: another handle's lock
// conflicts.
func lockByte(h handle, off int64, flags uint32) (bool, error) {
	err := windows.LockFileEx(h, flags|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, overlapped(off))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, windows.ERROR_LOCK_VIOLATION), errors.Is(err, windows.ERROR_IO_PENDING):
		return false, nil
	default:
		return false, fmt.Errorf("lock byte %d: %w", off, err)
	}
}

func unlockByte(h handle, off int64) error {
	if err := windows.UnlockFileEx(h, 0, 1, 0, overlapped(off)); err != nil {
		return fmt.Errorf("unlock byte %d: %w", off, err)
	}
	return nil
}
