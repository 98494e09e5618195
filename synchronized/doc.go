// Package synchronized runs work holding a mutexfx lock named from its
// input: net/http handlers (Middleware, MiddlewareFunc) and the actions of
// other transports, queues and RPC (Wrap, WrapFunc).
//
// Work needing the same lock runs one at a time in every instance sharing
// the store; other work runs in parallel. The lock name comes from a
// template ("order:{id}", parsed once at construction) or a function of the
// input. The work's ctx carries the lock (LockFrom) and is cancelled when
// the lock is lost; the lock is released when the work returns or panics.
package synchronized
