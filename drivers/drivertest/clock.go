package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// ServerTimeNear checks that c reads its store's clock within a second of
// this host's clock, taken during the call: the stores of the tests run on
// this host (or one synchronised with it).
func ServerTimeNear(t testing.TB, c drivers.ServerClock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := time.Now()
	got, err := c.ServerTime(ctx)
	after := time.Now()
	if err != nil {
		t.Fatalf("ServerTime: %v", err)
	}
	if got.Before(before.Add(-time.Second)) || got.After(after.Add(time.Second)) {
		t.Fatalf("ServerTime = %v; want within a second of [%v, %v]", got, before, after)
	}
}
