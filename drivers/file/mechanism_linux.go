package file

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
