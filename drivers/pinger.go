package drivers

import "context"

// Pinger is implemented by drivers that can check that their store
// answers, for health checks. Ping makes one round trip on the driver's
// connections (a Redis PING, a SQL ping) and returns the store's error.
// The component only pings a store it has used: a lazy driver that never
// connected is not made to connect by a health check.
type Pinger interface {
	Ping(ctx context.Context) error
}
