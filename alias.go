package mutexfx

import (
	"context"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

// The main types and values of package component, so that the common case
// needs one import.
type (
	// Mutex hands out named locks held in one store; see component.Mutex.
	Mutex = component.Mutex
	// Lock is a held lock; see component.Lock.
	Lock = component.Lock
	// Options configure a Mutex built without configuration; see
	// component.Options.
	Options = component.Options
	// AcquireOption overrides an option of one acquisition.
	AcquireOption = component.AcquireOption
	// DriverError is a store failure; see component.DriverError.
	DriverError = component.DriverError
	// OptionError is an invalid option; see component.OptionError.
	OptionError = component.OptionError
)

// Errors; see package component.
var (
	ErrTimeout        = component.ErrTimeout
	ErrLocked         = component.ErrLocked
	ErrLost           = component.ErrLost
	ErrReleased       = component.ErrReleased
	ErrDriver         = component.ErrDriver
	ErrClosed         = component.ErrClosed
	ErrEmptyName      = component.ErrEmptyName
	ErrNilFunc        = component.ErrNilFunc
	ErrNameTooLong    = component.ErrNameTooLong
	ErrInvalidOption  = component.ErrInvalidOption
	ErrDriverNotFound = drivers.ErrDriverNotFound
)

// Special timeouts; see component.Forever and component.NoWait.
const (
	Forever = component.Forever
	NoWait  = component.NoWait
)

// New builds a Mutex without configuration; see component.New. A nil
// opts.Driver is a new memory store, shared by no one else.
func New(opts Options) (*Mutex, error) {
	if opts.Driver == nil {
		opts.Driver = memory.New()
	}
	return component.New(opts)
}

// WithTTL sets one acquisition's ttl; see component.WithTTL.
func WithTTL(ttl time.Duration) AcquireOption { return component.WithTTL(ttl) }

// WithTimeout sets one acquisition's timeout; see component.WithTimeout.
func WithTimeout(timeout time.Duration) AcquireOption { return component.WithTimeout(timeout) }

// LockFrom returns the lock attached to ctx by Mutex.Do; see
// component.LockFrom.
func LockFrom(ctx context.Context) *Lock { return component.LockFrom(ctx) }
