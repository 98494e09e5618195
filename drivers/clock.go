package drivers

import (
	"context"
	"time"
)

// ServerClock is implemented by drivers that can read their store's clock:
// the clock the store computes its expiries with (Features.ServerTime).
// Callers that plan with their own clock compare it with the store's: the
// scheduler (package schedule) warns when an instance's clock is further
// from the store's than an exclusive job's safe limit.
//
// ServerTime connects lazily like the driver's other calls, respects ctx,
// and returns the store's current time with the precision the store gives
// (microseconds or better for Redis, PostgreSQL and MySQL). The reading is
// taken during the round trip: a caller bounds its uncertainty by half the
// round trip's duration.
type ServerClock interface {
	// ServerTime returns the store's current time.
	ServerTime(ctx context.Context) (time.Time, error)
}
