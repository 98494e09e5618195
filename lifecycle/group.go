package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"
)

// Group closes a set of named stores with one OnStop hook, all at once:
// each store's Close gets the whole stop deadline, and a store stuck on a
// dead link delays no other store's release. (fx runs stop hooks one after
// another and skips the rest once the deadline has passed: one hook per
// store would leave the stores after a stuck one unreleased.)
//
// The hook is appended when the Group is built: build it before the first
// store, so that it runs after the hooks of everything built on the stores.
type Group struct {
	log *zap.Logger

	mu     sync.Mutex
	stores map[string]Closer
}

// NewGroup returns a Group whose OnStop hook closes the stores added to it
// (CloseAll); log (nil: none) gets a warning naming each store that did
// not close in time.
func NewGroup(lc fx.Lifecycle, log *zap.Logger) *Group {
	g := &Group{log: log, stores: map[string]Closer{}}
	lc.Append(fx.StopHook(g.Close))
	return g
}

// Add adds the store name to the group.
func (g *Group) Add(name string, c Closer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stores[name] = c
}

// Close closes the group's stores as CloseAll does. With a deadline, the
// stores are given until a little before it (a tenth of the time left, at
// most stopMargin), so that the hook has logged which store did not close
// and returned its error before fx gives up on it at the deadline.
func (g *Group) Close(ctx context.Context) error {
	g.mu.Lock()
	stores := maps.Clone(g.stores)
	g.mu.Unlock()
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-min(time.Until(d)/10, stopMargin)))
		defer cancel()
	}
	return CloseAll(ctx, g.log, stores)
}

// stopMargin is the most Close keeps of the stop deadline for itself.
const stopMargin = 100 * time.Millisecond

// CloseAll closes every store concurrently, each bounded by ctx, and waits
// for them all. A store that fails or does not close before ctx ends is
// logged at WARN (log nil: not logged) by name; the errors are returned
// joined, each prefixed with its store's name, in name order.
//
// A component.Mutex whose Close runs out of time has ended its locks'
// contexts (ErrClosed), refuses new work and stops renewing at once; the
// locks it could not release expire in the store after their ttl.
func CloseAll(ctx context.Context, log *zap.Logger, stores map[string]Closer) error {
	names := slices.Sorted(maps.Keys(stores))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			if err := stores[name].Close(ctx); err != nil {
				errs[i] = fmt.Errorf("store %q: %w", name, err)
			}
		})
	}
	wg.Wait()
	if log != nil {
		for i, err := range errs {
			if err == nil {
				continue
			}
			msg := "mutex store failed to close"
			if ctx.Err() != nil {
				msg = "mutex store did not close within the stop deadline: locks it could not release expire by their ttl"
			}
			log.Warn(msg, zap.String("store", names[i]), zap.Error(err))
		}
	}
	return errors.Join(errs...)
}
