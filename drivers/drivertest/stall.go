package drivertest

import (
	"context"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// stallDriver wraps a driver; once stalled, every call hangs until its ctx
// ends, as a store that stops answering does.
type stallDriver struct {
	drivers.Driver
	mu      sync.Mutex
	stalled chan struct{} // closed by resume; nil when not stalled
}

var (
	_ drivers.Renewer   = (*stallDriver)(nil)
	_ drivers.Describer = (*stallDriver)(nil)
)

func (d *stallDriver) stall() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stalled == nil {
		d.stalled = make(chan struct{})
	}
}

func (d *stallDriver) resume() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stalled != nil {
		close(d.stalled)
		d.stalled = nil
	}
}

// hang blocks while stalled, until ctx ends (returning its error) or resume.
func (d *stallDriver) hang(ctx context.Context) error {
	d.mu.Lock()
	ch := d.stalled
	d.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-ch:
		return nil
	}
}

// Features are the wrapped driver's, but its calls now block.
func (d *stallDriver) Features() drivers.Features {
	f := drivers.FeaturesOf(d.Driver)
	f.InProcess = false
	return f
}

func (d *stallDriver) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	if err := d.hang(ctx); err != nil {
		return drivers.AcquireResult{}, err
	}
	return d.Driver.Acquire(ctx, req)
}

func (d *stallDriver) Release(ctx context.Context, key, token string) (bool, error) {
	if err := d.hang(ctx); err != nil {
		return false, err
	}
	return d.Driver.Release(ctx, key, token)
}

func (d *stallDriver) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	if err := d.hang(ctx); err != nil {
		return false, err
	}
	return d.Driver.Extend(ctx, key, token, ttl)
}

func (d *stallDriver) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	if err := d.hang(ctx); err != nil {
		return drivers.RenewFailed(len(leases), err)
	}
	if r, ok := d.Driver.(drivers.Renewer); ok {
		return r.Renew(ctx, leases)
	}
	out := make([]drivers.RenewResult, len(leases))
	for i, l := range leases {
		out[i].Held, out[i].Err = d.Driver.Extend(ctx, l.Key, l.Token, l.TTL)
	}
	return out
}
