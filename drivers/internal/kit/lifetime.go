package kit

import (
	"context"
	"sync"

	"github.com/mutexfx/mutexfx/drivers"
)

// The closed flag of a driver is guarded by the driver's own mutex, with
// the state that Close clears (subscriptions, held locks): a call that
// finds the driver open under that mutex registers its state before Close
// can clear it. These two functions are its one reading and its one
// setting.

// CloseOnce begins a driver's idempotent Close: under mu, the first time
// only, it sets closed and runs clear (which takes from the driver what
// Close is to end, mu held), and reports whether it did. A later call
// returns false: Close has nothing more to do and returns nil.
func CloseOnce(mu sync.Locker, closed *bool, clear func()) bool {
	mu.Lock()
	defer mu.Unlock()
	if *closed {
		return false
	}
	*closed = true
	clear()
	return true
}

// LockOpen takes mu for a call that registers state under it (a
// subscription): it returns ctx's error, or drivers.ErrClosed once closed
// is set, without mu; nil with mu held.
func LockOpen(ctx context.Context, mu sync.Locker, closed *bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	mu.Lock()
	if *closed {
		mu.Unlock()
		return drivers.ErrClosed
	}
	return nil
}

// CheckOpen returns drivers.ErrClosed once closed is set, else nil, read
// under mu.
func CheckOpen(mu sync.Locker, closed *bool) error {
	mu.Lock()
	defer mu.Unlock()
	if *closed {
		return drivers.ErrClosed
	}
	return nil
}
