package component

import (
	"errors"
	"fmt"

	"github.com/mutexfx/mutexfx/drivers"
)

var (
	// ErrTimeout reports that a lock was not acquired before the wait's
	// timeout (or, with a timeout of zero, at the single attempt). HTTP
	// adapters map it to 409 Conflict.
	ErrTimeout = errors.New("mutexfx: timeout waiting for lock")

	// ErrLocked reports that TryAcquire found the lock held by another
	// holder (or waited for in this Mutex). Test with errors.Is.
	ErrLocked = errors.New("mutexfx: lock held by another holder")

	// ErrLost is the cause of a lock's context when the lock is lost: a
	// renewal found it gone or taken, the store stayed unreachable until the
	// lock's expiry, or an advisory lock's connection closed. Acquire never
	// returns it. Test with errors.Is(lock.Err(), ErrLost), which also checks
	// the lock's tracked expiry; context.Cause(lock.Context()) does not, so
	// look at it once the context's Err is non-nil.
	ErrLost = errors.New("mutexfx: lock lost")

	// ErrReleased is the cause of a lock's context after Release.
	ErrReleased = errors.New("mutexfx: lock released")

	// ErrDriver matches every *DriverError: the store failed.
	ErrDriver = errors.New("mutexfx: store failed")

	// ErrClosed reports a call on a closed Mutex; it is also the cause of
	// the context of the locks the closing released. It is
	// drivers.ErrClosed, which every driver returns once closed: one
	// errors.Is test covers a closed Mutex and a closed store.
	ErrClosed = drivers.ErrClosed

	// ErrEmptyName reports an empty lock name.
	ErrEmptyName = errors.New("mutexfx: empty lock name")

	// ErrNameTooLong reports a lock name longer than the store's
	// MaxNameLength (configuration key maxNameLength).
	ErrNameTooLong = errors.New("mutexfx: lock name too long")

	// ErrInvalidOption matches every *OptionError.
	ErrInvalidOption = errors.New("mutexfx: invalid option")

	// ErrDriverNotFound reports a configured driver type that is not linked
	// into the binary; the message names the package to import.
	ErrDriverNotFound = drivers.ErrDriverNotFound
)

// DriverError is a store failure during a call. It wraps the driver's error
// and matches ErrDriver.
type DriverError struct {
	// Store is the Mutex's name ("mutex", "orders").
	Store string
	// Op is the operation: "acquire", "release", "extend", "renew", "close".
	Op string
	// Lock is the lock name, when the operation had one.
	Lock string
	// Err is the driver's error.
	Err error
}

// Error describes the failure. It never contains credentials: drivers keep
// them out of their errors.
func (e *DriverError) Error() string {
	if e.Lock != "" {
		return fmt.Sprintf("mutexfx: store %q: %s %q: %v", e.Store, e.Op, e.Lock, e.Err)
	}
	return fmt.Sprintf("mutexfx: store %q: %s: %v", e.Store, e.Op, e.Err)
}

// Unwrap returns the driver's error.
func (e *DriverError) Unwrap() error { return e.Err }

// Is reports whether target is ErrDriver.
func (e *DriverError) Is(target error) bool { return target == ErrDriver }

// lockedError is TryAcquire's error for a lock held by another holder.
func lockedError(name string) error { return fmt.Errorf("%w: %q", ErrLocked, name) }

// OptionError is an invalid option given to New or to an acquisition. It
// matches ErrInvalidOption.
type OptionError struct {
	// Field is the option's name ("TTL", "RetryDelay").
	Field string
	// Msg says what is wrong.
	Msg string
}

// Error returns "mutexfx: invalid option Field: Msg".
func (e *OptionError) Error() string {
	return "mutexfx: invalid option " + e.Field + ": " + e.Msg
}

// Is reports whether target is ErrInvalidOption.
func (e *OptionError) Is(target error) bool { return target == ErrInvalidOption }
