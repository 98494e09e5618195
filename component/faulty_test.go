package component_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

// faulty wraps the memory store with injected faults: a delay before each
// call (which may ignore ctx, as a hung store does), failing renewals, and
// counters. It hides the memory store's Subscriber, so waiters poll.
type faulty struct {
	*memory.Driver

	mu          sync.Mutex
	delay       time.Duration // before Acquire
	ignoreCtx   bool          // the delay does not end with ctx
	renewErr    error         // Renew and Extend fail with it
	acquires    atomic.Int32
	releases    atomic.Int32
	renews      atomic.Int32
	renewLeases atomic.Int32
	batches     []int // leases per renewal call, under mu
	// renewed, when set, gets the error (or nil) of each renewal call;
	// a call finding it full does not wait
	renewed chan error
}

func newFaulty() *faulty { return &faulty{Driver: memory.New()} }

// Features are the memory store's, but calls may block: not InProcess.
func (f *faulty) Features() drivers.Features {
	feat := f.Driver.Features()
	feat.InProcess = false
	return feat
}

// Subscribe is not offered: the component falls back to polling.
func (f *faulty) Subscribe() {}

func (f *faulty) set(fn func(f *faulty)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *faulty) wait(ctx context.Context) error {
	f.mu.Lock()
	d, ignore := f.delay, f.ignoreCtx
	f.mu.Unlock()
	if d == 0 {
		return nil
	}
	if ignore {
		time.Sleep(d) // a store that answers late whatever the caller wants
		return nil
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *faulty) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	f.acquires.Add(1)
	if err := f.wait(ctx); err != nil {
		return drivers.AcquireResult{}, err
	}
	return f.Driver.Acquire(context.WithoutCancel(ctx), req)
}

func (f *faulty) Release(ctx context.Context, key, token string) (bool, error) {
	f.releases.Add(1)
	return f.Driver.Release(ctx, key, token)
}

func (f *faulty) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	f.renews.Add(1)
	f.renewLeases.Add(int32(len(leases)))
	f.mu.Lock()
	err, renewed := f.renewErr, f.renewed
	f.batches = append(f.batches, len(leases))
	f.mu.Unlock()
	if renewed != nil {
		select {
		case renewed <- err:
		default:
		}
	}
	if err != nil {
		out := make([]drivers.RenewResult, len(leases))
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	return f.Driver.Renew(ctx, leases)
}

func (f *faulty) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	f.mu.Lock()
	err := f.renewErr
	f.mu.Unlock()
	if err != nil {
		return false, err
	}
	return f.Driver.Extend(ctx, key, token, ttl)
}

// signalled is the memory store, every capability kept (its events above
// all), that tells each renewal call it applied on renewed: a scenario
// waits on the renewals it follows rather than on the bubble's clock.
type signalled struct {
	*memory.Driver
	renewed chan struct{} // a call finding it full does not wait
	calls   atomic.Int64  // renewal calls applied
}

func newSignalled() *signalled {
	return &signalled{Driver: memory.New(), renewed: make(chan struct{}, 100)}
}

func (d *signalled) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	out := d.Driver.Renew(ctx, leases)
	d.calls.Add(1)
	select {
	case d.renewed <- struct{}{}:
	default:
	}
	return out
}

// renewedAt waits for the first renewal call applied after at least
// after since l was acquired (the bubble's clock advances to each call),
// then for the component to have taken its answer in; it reports how
// long after the acquisition that call came. It fails the test if l ends
// first.
func (d *signalled) renewedAt(t *testing.T, l *component.Lock, after time.Duration) time.Duration {
	t.Helper()
	for time.Since(l.AcquiredAt()) < after {
		select {
		case <-d.renewed:
		case <-l.Done():
			t.Fatalf("%s ended %v after its acquisition, before a renewal at %v: %v", l.Name(), time.Since(l.AcquiredAt()), after, l.Err())
		}
	}
	synctest.Wait()
	return time.Since(l.AcquiredAt())
}
