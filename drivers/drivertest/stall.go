package drivertest

import (
	"context"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

// stallDriver wraps a driver; once stalled, every call hangs until its ctx
// ends, as a store that stops answering does.
type stallDriver struct {
	drivers.Driver
	gate kit.Gate // shut while stalled
}

var (
	_ drivers.Renewer   = (*stallDriver)(nil)
	_ drivers.Describer = (*stallDriver)(nil)
)

func (d *stallDriver) stall() { d.gate.Shut() }

func (d *stallDriver) resume() { d.gate.Open() }

// hang blocks while stalled, until ctx ends (returning its error) or resume.
func (d *stallDriver) hang(ctx context.Context) error { return d.gate.Wait(ctx) }

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
