//go:build !linux

package file

// haveOFD: open-file-description locks are Linux's.
const haveOFD = false

// defaultMechanism is the Mechanism of Options that name none.
var defaultMechanism = MechanismFlock
