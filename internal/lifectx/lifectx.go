// Package lifectx binds a call's context to the life of what serves it (a
// driver, until its Close gives up waiting), so that the call ends with
// either.
package lifectx

import "context"

// Bind returns ctx, also cancelled with cause when life ends, and the
// function to call when done with it. When life has already ended, the
// returned context is cancelled at once (context.AfterFunc would cancel it
// later, from another goroutine).
func Bind(ctx, life context.Context, cause error) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	if life.Err() != nil {
		cancel(cause)
		return ctx, func() {}
	}
	after := context.AfterFunc(life, func() { cancel(cause) })
	return ctx, func() {
		after()
		cancel(nil)
	}
}
