package testutil

import (
	"context"
	"testing"
	"time"
)

// Context returns a context that ends after timeout, or when the test
// ends: a bound on a test's calls to its store, so that a hung store fails
// the test instead of its whole run.
func Context(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}
