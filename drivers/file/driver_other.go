//go:build !(linux || darwin || dragonfly || freebsd || openbsd || windows)

package file

import (
	"context"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// Driver is the file driver; New fails on this operating system.
type Driver struct{}

// New validates opts and returns ErrUnsupported: the file driver needs the
// file locks of Linux, macOS, the BSDs or Windows.
func New(opts Options) (*Driver, error) {
	if _, err := opts.withDefaults(); err != nil {
		return nil, err
	}
	return nil, ErrUnsupported
}

// Acquire fails with ErrUnsupported.
func (d *Driver) Acquire(context.Context, drivers.AcquireRequest) (drivers.AcquireResult, error) {
	return drivers.AcquireResult{}, ErrUnsupported
}

// Release fails with ErrUnsupported.
func (d *Driver) Release(context.Context, string, string) (bool, error) { return false, ErrUnsupported }

// Extend fails with ErrUnsupported.
func (d *Driver) Extend(context.Context, string, string, time.Duration) (bool, error) {
	return false, ErrUnsupported
}

// Close does nothing.
func (d *Driver) Close(context.Context) error { return nil }
