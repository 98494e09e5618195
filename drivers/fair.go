package drivers

import "time"

// Fair-queue timing of the drivers whose stores queue waiters
// (Features.BlockingWait: Redis, PostgreSQL in table mode), documented
// once: a waiting Acquire holds a turn in the lock's queue by retrying.
const (
	// WaitPollInterval is how often a waiting Acquire retries when no
	// release message wakes it; each retry also proves the waiter alive
	// and keeps its turn.
	WaitPollInterval = 100 * time.Millisecond
	// WaiterLiveness is how long a queued waiter keeps its turn without
	// retrying: a waiter that hangs or crashed, or whose wait ran out and
	// that does not ask again, delays the others by at most this long.
	// It is four WaitPollIntervals: a live waiter retries several times
	// within it.
	WaiterLiveness = 4 * WaitPollInterval
)
