package file

import (
	"errors"

	"golang.org/x/sys/unix"
)

// defaultMechanism is the Mechanism of Options that name none; a variable
// so that the tests can run the whole suite with each mechanism.
var defaultMechanism = MechanismOFD

// supported reports whether m is available here.
func supported(m Mechanism) bool { return m == MechanismOFD || m == MechanismFlock }

// newLocker returns the locker of opts' (validated) mechanism.
func newLocker(opts Options) locker {
	if opts.Mechanism == MechanismFlock {
		return flocker{mode: uint32(opts.FileMode)}
	}
	return ofd{}
}

// guardOFD takes, for MechanismFlock, the guard of MechanismOFD as well
// (the OFD lock of stateByte), after the flock: the two mechanisms' locks
// do not see each other, so without it two drivers of a directory
// configured with different mechanisms could each read a lock free under
// its own guard and both take it. With it, the one that writes its record
// second finds it held with the other mechanism and fails with
// ErrMechanism. A kernel without OFD locks (before Linux 3.15: EINVAL) has
// no MechanismOFD driver to exclude.
func guardOFD(fd int) (bool, error) {
	ok, err := tryLock(fd, stateByte)
	if errors.Is(err, unix.EINVAL) {
		return true, nil
	}
	return ok, err
}

// unguardOFD drops the lock guardOFD took.
func unguardOFD(fd int) error {
	if err := unlock(fd, stateByte); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return nil
}
