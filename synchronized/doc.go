// Package synchronized runs work holding a mutexfx lock named from its
// input: net/http handlers (Middleware, MiddlewareFunc) and the actions of
// other transports, queues and RPC (Wrap, WrapFunc).
//
// Work needing the same lock runs one at a time in every instance sharing
// the store; other work runs in parallel. The lock name comes from a
// template ("order:{id}", parsed once at construction) or a function of the
// input. The work's ctx carries the lock (LockFrom) and is cancelled when
// the lock is lost; the lock is released when the work returns or panics.
//
// A template names different inputs with different names: the values are
// escaped, '%' and the template's separators (the characters of its
// literal text other than ASCII letters and digits) percent-encoded. Under
// "{tenant}:{id}", the path /t/a:b/orders/c locks "a%3Ab:c" and
// /t/a/orders/b:c locks "a:b%3Ac"; under "order:{id}", id "1:refund" locks
// "order:1%3Arefund", not the name "order:{id}:refund" gives for id 1. Ids
// without such characters are kept as they are ("order:42"). See Template.
package synchronized
