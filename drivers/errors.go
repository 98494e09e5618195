package drivers

import (
	"errors"
	"fmt"
)

// The error vocabulary every driver shares, so that one errors.Is test
// covers every store.
var (
	// ErrClosed reports a call on a closed driver. It is also
	// component.ErrClosed (and mutexfx.ErrClosed): a call on a closed
	// Mutex and a call that met a closed store match the same sentinel.
	ErrClosed = errors.New("mutexfx: closed")

	// ErrOptions matches every invalid driver option: errors of a driver's
	// New and of its Factory, and every *OptionsError.
	ErrOptions = errors.New("mutexfx: invalid driver options")
)

// OptionsError is an invalid driver option: the key (an option's
// configuration key, or its full key path such as
// "mutex.orders.driver.url") and what is wrong with it. It matches
// ErrOptions and wraps Err. Its message never holds a credential.
type OptionsError struct {
	// Key names the option: its key, or its full key path. Empty when the
	// problem is of the options as a whole.
	Key string
	// Err says what is wrong.
	Err error
}

// Error returns "Key: Err", or Err's message when Key is empty.
func (e *OptionsError) Error() string {
	if e.Key == "" {
		return e.Err.Error()
	}
	return e.Key + ": " + e.Err.Error()
}

// Unwrap returns Err.
func (e *OptionsError) Unwrap() error { return e.Err }

// Is reports whether target is ErrOptions.
func (e *OptionsError) Is(target error) bool { return target == ErrOptions }

// OptionErrorf returns an *OptionsError at key (an option's configuration
// key; "" when the problem is of the options as a whole) whose Err is
// fmt.Errorf(format, args...). A driver's New reports each invalid option
// so; its Factory then names the option's full key path.
func OptionErrorf(key, format string, args ...any) error {
	return &OptionsError{Key: key, Err: fmt.Errorf(format, args...)}
}
