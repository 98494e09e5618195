package drivers

import (
	"context"
	"errors"
)

// ErrNotSupported reports a capability a driver has only in some of its
// modes (List on advisory locks).
var ErrNotSupported = errors.New("mutexfx: not supported by this store")

// ListedLock is one held lock found by a [Lister].
type ListedLock struct {
	// Key is the lock's key (the component's prefix and the lock name).
	Key string
	LockInfo
}

// Lister is implemented by drivers whose store can enumerate its held
// locks. Stores that keep no record of their locks (advisory locks) do not
// implement it; a driver listing in some modes only returns
// ErrNotSupported in the others.
type Lister interface {
	// List returns the held locks whose keys start with prefix, in no
	// particular order. A lock released or expired during the call may or
	// may not be listed.
	List(ctx context.Context, prefix string) ([]ListedLock, error)
}
