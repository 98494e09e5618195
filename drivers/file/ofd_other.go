//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package file

// ofdLocker is never called here: Options accepts MechanismOFD only on
// Linux.
func ofdLocker() locker { panic("mutexfx/file: OFD locks need Linux") }
