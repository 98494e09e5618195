//go:build !(linux || darwin || dragonfly || freebsd || openbsd || windows)

package file

// defaultMechanism is the Mechanism of Options that name none (New then
// fails with ErrUnsupported).
var defaultMechanism = MechanismFlock

// supported reports whether m is available here: none is.
func supported(m Mechanism) bool { return m == MechanismFlock }
