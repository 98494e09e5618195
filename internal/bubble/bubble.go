// Package bubble lets the module's tests that run a component in a
// testing/synctest bubble turn off the component's pool of waiters: a
// pooled waiter's channel made inside one bubble must not be used outside
// it, or in another.
package bubble

import "sync/atomic"

// Unpooled, when set, makes the component allocate every waiter and leave
// it to the garbage collector instead of pooling it.
var Unpooled atomic.Bool

// Cleaner is what Unpool needs of a *testing.T.
type Cleaner interface{ Cleanup(func()) }

// Unpool sets Unpooled until t ends. Call it outside the bubble, before
// synctest.Test.
func Unpool(t Cleaner) {
	Unpooled.Store(true)
	t.Cleanup(func() { Unpooled.Store(false) })
}
