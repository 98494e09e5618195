package file

// defaultMechanism is the Mechanism of Options that name none.
var defaultMechanism = MechanismLockFile

// supported reports whether m is available here.
func supported(m Mechanism) bool { return m == MechanismLockFile }

// newLocker returns the locker of opts' (validated) mechanism.
func newLocker(Options) locker { return lockFileEx{} }
