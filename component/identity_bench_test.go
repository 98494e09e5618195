package component

import (
	"crypto/rand"
	"testing"
	"time"
)

// BenchmarkToken compares the identity-carrying token with the plain
// random one it replaced, side by side.
func BenchmarkToken(b *testing.B) {
	b.Run("random", func(b *testing.B) {
		for b.Loop() {
			_ = rand.Text()
		}
	})
	b.Run("identity", func(b *testing.B) {
		m := &Mutex{ident: identSuffix("benchmark-app")}
		now := time.Now()
		for b.Loop() {
			_ = m.newToken(now)
		}
	})
}
