package kit_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

// TestGate: an open gate lets a call through at once; a shut one holds
// it until Open, or until the call's ctx ends. Shutting or opening twice
// changes nothing.
func TestGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g kit.Gate
		if err := g.Wait(t.Context()); err != nil {
			t.Fatalf("Wait on the zero gate = %v", err)
		}
		g.Shut()
		g.Shut()
		done := make(chan error, 1)
		go func() { done <- g.Wait(t.Context()) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Wait on a shut gate returned %v", err)
		default:
		}
		g.Open()
		if err := <-done; err != nil {
			t.Fatalf("Wait after Open = %v", err)
		}
		g.Open()
		if err := g.Wait(t.Context()); err != nil {
			t.Fatalf("Wait on the opened gate = %v", err)
		}

		g.Shut()
		ctx, cancel := context.WithCancel(t.Context())
		go func() { done <- g.Wait(ctx) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait with its ctx ended = %v; want context.Canceled", err)
		}
	})
}
