//go:build linux

package file

// SetDefaultMechanism sets the Mechanism of Options that name none, so that
// the suite runs with each (see TestMain).
func SetDefaultMechanism(m Mechanism) { defaultMechanism = m }

// DescriptorsPerLock is how many descriptors a lock held with the default
// mechanism keeps open.
func DescriptorsPerLock() int {
	if defaultMechanism == MechanismFlock {
		return 2 // the lock file and its liveness file
	}
	return 1
}
