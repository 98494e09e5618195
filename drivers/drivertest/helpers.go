package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
)

// Mutex returns a component built with opts (on opts.Driver), closed
// (within 5 s) when the test ends, before the test's earlier cleanups
// (such as its driver's Close) run.
func Mutex(t testing.TB, opts component.Options) *component.Mutex {
	t.Helper()
	m, err := component.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	CloseAtEnd(t, m)
	return m
}

// CloseAtEnd closes c (a driver, a component), within 5 s, when the test
// ends, before the test's earlier cleanups run.
func CloseAtEnd(t testing.TB, c interface{ Close(context.Context) error }) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
}

// Link is a test's link to its store that it can stall (a
// testutil.Proxy): Stall stops it, Resume heals it, Blocked reports how
// many of its directions hold bytes back.
type Link interface {
	Stall()
	Resume()
	Blocked() int
}

// CloseCutsStalled is CloseCutsStalledDial when firstDial, else
// CloseCutsStalledCall, on d reaching its store through link.
func CloseCutsStalled(t *testing.T, d drivers.Driver, errClosed error, link Link, firstDial bool) {
	t.Helper()
	if firstDial {
		CloseCutsStalledDial(t, d, errClosed, link.Stall, link.Resume, link.Blocked)
		return
	}
	CloseCutsStalledCall(t, d, errClosed, link.Stall, link.Resume, link.Blocked)
}

// Outcome is what an Acquire started by AcquireAsync returned, and when.
type Outcome struct {
	Res drivers.AcquireResult
	Err error
	At  time.Time // when Acquire returned
}

// AcquireAsync runs d.Acquire(ctx, req) on its own goroutine and returns
// the channel its Outcome arrives on (buffered: the goroutine ends even if
// nobody reads it).
func AcquireAsync(ctx context.Context, d drivers.Driver, req drivers.AcquireRequest) <-chan Outcome {
	out := make(chan Outcome, 1)
	go func() {
		res, err := d.Acquire(ctx, req)
		out <- Outcome{res, err, time.Now()}
	}()
	return out
}

// Extended is what an Extend started by ExtendAsync returned.
type Extended struct {
	Held bool
	Err  error
}

// ExtendAsync runs d.Extend(ctx, key, token, ttl) on its own goroutine and
// returns the channel its result arrives on (buffered: the goroutine ends
// even if nobody reads it).
func ExtendAsync(ctx context.Context, d drivers.Driver, key, token string, ttl time.Duration) <-chan Extended {
	out := make(chan Extended, 1)
	go func() {
		held, err := d.Extend(ctx, key, token, ttl)
		out <- Extended{held, err}
	}()
	return out
}
