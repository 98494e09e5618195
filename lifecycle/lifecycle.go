// Package lifecycle ties mutexfx stores to an fx application's lifecycle:
// nothing connects on start (stores connect at their first acquisition); on
// stop every store releases the locks it holds and closes its driver, within
// the stop hook's deadline — all stores at once (Group), so that a store
// stuck on a dead link delays no other store's release.
package lifecycle

import (
	"context"

	"go.uber.org/fx"
)

// Closer is what a store is to the lifecycle: component.Mutex and
// mutexfx.Registry are Closers.
type Closer interface {
	Close(ctx context.Context) error
}

// Register appends an OnStop hook closing c. The hook respects its ctx: a
// store that cannot release its locks in time leaves them to expire.
func Register(lc fx.Lifecycle, c Closer) {
	lc.Append(fx.StopHook(func(ctx context.Context) error { return c.Close(ctx) }))
}
