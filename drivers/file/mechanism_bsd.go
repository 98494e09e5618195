//go:build darwin || dragonfly || freebsd || openbsd

package file

// defaultMechanism is the Mechanism of Options that name none.
var defaultMechanism = MechanismFlock

// supported reports whether m is available here.
func supported(m Mechanism) bool { return m == MechanismFlock }

// newLocker returns the locker of opts' (validated) mechanism.
func newLocker(opts Options) locker { return flocker{mode: uint32(opts.FileMode)} }

// guardOFD does nothing: MechanismFlock is the only mechanism here (see the
// Linux one).
func guardOFD(int) (bool, error) { return true, nil }

// unguardOFD does nothing.
func unguardOFD(int) error { return nil }
