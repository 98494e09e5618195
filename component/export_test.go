package component

import "testing"

// Unpooled makes waiters unpooled for the rest of t (see unpooled): for
// tests in a testing/synctest bubble. Call it outside the bubble.
func Unpooled(t testing.TB) {
	unpooled.Store(true)
	t.Cleanup(func() { unpooled.Store(false) })
}
