// Package memory is the in-process lock store, mutexfx's default: locks are
// shared by the components of one process that share the Driver. Locks
// expire after their ttl, fences grow with every acquisition in the Driver,
// and releases wake waiters at once.
package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// Compile-time checks of the capabilities.
var (
	_ drivers.Driver     = (*Driver)(nil)
	_ drivers.Renewer    = (*Driver)(nil)
	_ drivers.Subscriber = (*Driver)(nil)
	_ drivers.Inspector  = (*Driver)(nil)
	_ drivers.Describer  = (*Driver)(nil)
)

// Driver is an in-memory lock store. The zero value is not usable; call New.
// Close does not drop the locks: components sharing the Driver each close it.
type Driver struct {
	mu    sync.Mutex
	locks map[string]entry
	fence uint64

	subMu sync.Mutex
	nsub  int
	subs  atomic.Pointer[[]subscriber] // copy-on-write: publishing allocates nothing
}

type entry struct {
	token   string
	fence   uint64
	expires time.Time
}

type subscriber struct {
	id int
	fn func(drivers.Event)
}

// New returns an empty store.
func New() *Driver {
	return &Driver{locks: map[string]entry{}}
}

// Factory returns the factory of the "memory" driver type. Each call of its
// New returns the same store, shared process-wide by every store configured
// with type memory (and equal prefixes share locks, as with any store). The
// memory type takes no options.
func Factory() drivers.Factory {
	return drivers.Factory{Type: "memory", New: newFromSpec}
}

var shared = sync.OnceValue(New)

func newFromSpec(spec drivers.Spec) (drivers.Driver, error) {
	// Not config.Decode: config imports component, whose tests use this
	// package.
	if len(spec.Options) > 0 {
		key := slices.Min(slices.Collect(maps.Keys(spec.Options)))
		return nil, fmt.Errorf("%s.%s: unknown key (the memory driver takes no options)", spec.Path, key)
	}
	return shared(), nil
}

// Features: expiring, process clock, fencing, in process, scope "process".
func (d *Driver) Features() drivers.Features {
	return drivers.Features{Expiring: true, ServerTime: true, Fencing: true, InProcess: true, Scope: "process",
		MinTTL: 10 * time.Millisecond}
}

// Acquire takes key for req.Token when it is free or expired.
func (d *Driver) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	if err := ctx.Err(); err != nil {
		return drivers.AcquireResult{}, err
	}
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.locks[req.Key]; ok && now.Before(e.expires) {
		return drivers.AcquireResult{HolderTTL: e.expires.Sub(now)}, nil
	}
	d.fence++
	d.locks[req.Key] = entry{token: req.Token, fence: d.fence, expires: now.Add(req.TTL)}
	return drivers.AcquireResult{Acquired: true, Fence: d.fence}, nil
}

// Release frees key if token holds it and wakes the subscribers.
func (d *Driver) Release(ctx context.Context, key, token string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	now := time.Now()
	d.mu.Lock()
	e, ok := d.locks[key]
	ok = ok && e.token == token
	if ok {
		delete(d.locks, key)
	}
	d.mu.Unlock()
	if ok {
		d.publish(drivers.Event{Kind: drivers.Released, Key: key})
	}
	return ok && now.Before(e.expires), nil
}

// Extend sets key's expiry to ttl from now if token holds it.
func (d *Driver) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return d.extend(time.Now(), key, token, ttl), nil
}

func (d *Driver) extend(now time.Time, key, token string, ttl time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.locks[key]
	if !ok || e.token != token || !now.Before(e.expires) {
		return false
	}
	e.expires = now.Add(ttl)
	d.locks[key] = e
	return true
}

// Renew extends every lease.
func (d *Driver) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	if err := ctx.Err(); err != nil {
		return drivers.RenewFailed(len(leases), err)
	}
	out := make([]drivers.RenewResult, len(leases))
	now := time.Now()
	for i, l := range leases {
		out[i].Held = d.extend(now, l.Key, l.Token, l.TTL)
	}
	return out
}

// Inspect describes key's holder.
func (d *Driver) Inspect(ctx context.Context, key string) (drivers.LockInfo, bool, error) {
	if err := ctx.Err(); err != nil {
		return drivers.LockInfo{}, false, err
	}
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.locks[key]
	if !ok || !now.Before(e.expires) {
		return drivers.LockInfo{}, false, nil
	}
	return drivers.LockInfo{Token: e.token, Fence: e.fence, TTL: e.expires.Sub(now)}, true, nil
}

// Revoke drops key from the store whoever holds it, as if it had expired,
// and tells the subscribers that its holder lost it. For tests. It reports
// whether key was held. To make one holder's lock lost, use RevokeToken.
func (d *Driver) Revoke(key string) bool {
	return d.revoke(key, func(entry) bool { return true })
}

// RevokeToken is Revoke of key only when token holds it: a lock released
// since, and now held by another token, is left to that holder. For tests
// (package fxtest's Lose uses it). It reports whether it revoked.
func (d *Driver) RevokeToken(key, token string) bool {
	return d.revoke(key, func(e entry) bool { return e.token == token })
}

// revoke drops key if its entry is one of whose, and publishes the loss.
func (d *Driver) revoke(key string, whose func(entry) bool) bool {
	d.mu.Lock()
	e, ok := d.locks[key]
	ok = ok && whose(e)
	if ok {
		delete(d.locks, key)
	}
	d.mu.Unlock()
	if ok {
		d.publish(drivers.Event{Kind: drivers.Lost, Key: key, Token: e.token})
	}
	return ok
}

// Subscribe calls fn for every release and revocation until cancel.
func (d *Driver) Subscribe(_ context.Context, fn func(drivers.Event)) (func(), error) {
	d.subMu.Lock()
	defer d.subMu.Unlock()
	d.nsub++
	id := d.nsub
	var subs []subscriber
	if p := d.subs.Load(); p != nil {
		subs = append(subs, *p...)
	}
	subs = append(subs, subscriber{id: id, fn: fn})
	d.subs.Store(&subs)
	return func() { d.unsubscribe(id) }, nil
}

func (d *Driver) unsubscribe(id int) {
	d.subMu.Lock()
	defer d.subMu.Unlock()
	var subs []subscriber
	for _, s := range *d.subs.Load() {
		if s.id != id {
			subs = append(subs, s)
		}
	}
	d.subs.Store(&subs)
}

func (d *Driver) publish(e drivers.Event) {
	if p := d.subs.Load(); p != nil {
		for _, s := range *p {
			s.fn(e)
		}
	}
}

// Close does nothing: the locks stay for the other components sharing the
// Driver, and the process's end drops them.
func (d *Driver) Close(context.Context) error { return nil }
