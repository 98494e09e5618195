// Package drivers defines the contract between the mutexfx component and the
// stores that hold its locks.
//
// A driver is deliberately small: it takes a lock for a token, releases it by
// token, extends it by token and closes. Everything else — waiting, FIFO
// queueing, renewal timing, loss detection, logging — lives in the component
// (package component), so that every driver gets the same semantics.
//
// Optional capabilities are detected with type assertions:
//
//   - [Renewer]: renew many held locks in one round trip per batch.
//   - [Subscriber]: push events (a name was released, a held lock was lost).
//   - [Inspector]: look at a held lock (holder token, fence, remaining ttl).
//   - [Describer]: static [Features] (expiring or session locks, server clock,
//     fencing, server-side blocking waits).
//   - [Handoverer]: pass a held lock straight to a new token.
//   - [ServerClock]: read the store's clock.
//
// Drivers must connect lazily: constructing one connects nothing; the first
// call does. Every method must respect its ctx and be safe for concurrent use.
// A driver reports store failures as plain errors; the component wraps them in
// a DriverError, and Acquire retries them within its timeout unless the
// driver marked them Permanent. A key is the component's prefix followed by the lock name;
// drivers treat it as opaque data (never as a path or as SQL).
package drivers

import (
	"context"
	"errors"
	"time"
)

// ErrPermanent marks a store error that retrying cannot cure: bad
// credentials, a missing permission, a configuration the store refuses.
// The component retries every other error of Acquire until the wait's
// timeout (a fail-over, a restart, a broken link end by themselves); a
// driver wraps an error with Permanent to end the wait at once.
var ErrPermanent = errors.New("permanent store error")

// Permanent returns err marked permanent: it matches ErrPermanent and
// wraps err, with err's message. Nil for a nil err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

type permanentError struct{ err error }

func (e permanentError) Error() string        { return e.err.Error() }
func (e permanentError) Unwrap() error        { return e.err }
func (e permanentError) Is(target error) bool { return target == ErrPermanent }

// Driver is a lock store.
type Driver interface {
	// Acquire makes one attempt to take the lock req.Key for req.Token.
	// It returns Acquired true and the fence when the lock was free (or
	// expired), Acquired false when another holder has it. An error means the
	// store failed and nothing is known.
	Acquire(ctx context.Context, req AcquireRequest) (AcquireResult, error)

	// Release frees the lock key if token holds it. It reports whether it did:
	// false when the lock had expired, was taken by another token or was
	// already released.
	Release(ctx context.Context, key, token string) (bool, error)

	// Extend sets the lock's time to live to ttl from now (in the store's
	// clock) if token holds it, and reports whether it did. Drivers whose
	// locks do not expire check that the lock is still held.
	Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error)

	// Close releases the driver's resources (connections, goroutines). It
	// does not release locks; the component does that before closing. A
	// driver built on a client it was given never closes that client.
	Close(ctx context.Context) error
}

// AcquireRequest is one attempt to take a lock.
type AcquireRequest struct {
	// Key is the lock's name in the store: the component's prefix followed by
	// the lock name. Opaque data of any length and content.
	Key string
	// Token identifies the holder; random, at least 128 bits.
	Token string
	// TTL is how long the lock stays held without a renewal. Drivers whose
	// locks do not expire ignore it.
	TTL time.Duration
	// Wait is how long a driver with Features.BlockingWait may block in the
	// store waiting for the lock before answering Acquired false. Zero means
	// do not wait. Other drivers ignore it.
	Wait time.Duration
}

// AcquireResult is the answer to an AcquireRequest.
type AcquireResult struct {
	// Acquired reports whether the lock is now held by the request's token.
	Acquired bool
	// Fence is the lock's fencing token when Acquired: it grows with every
	// acquisition of the same key in the store. Zero only for drivers without
	// fencing (Features.Fencing false).
	Fence uint64
	// HolderTTL is, when not Acquired, how long the store says the lock
	// stays taken at most: the holder's remaining time to live, or less
	// where the driver knows an attempt may succeed sooner (a queue's head
	// polling its row). Zero when unknown. The component uses it to bound
	// its wait before the next attempt.
	HolderTTL time.Duration
}

// Lease names a held lock for a batched renewal.
type Lease struct {
	Key   string
	Token string
	TTL   time.Duration
}

// RenewResult is the outcome of renewing one Lease.
type RenewResult struct {
	// Held is true when the lease was renewed, false when the lock was gone
	// or held by another token. It is meaningless when Err is set.
	Held bool
	// Err is set when the store failed for this lease; nothing is known.
	Err error
}

// RenewFailed returns the results of a Renew of n leases that failed as a
// whole (a closed driver, an ended ctx, a store out of reach): err for
// each lease.
func RenewFailed(n int, err error) []RenewResult {
	out := make([]RenewResult, n)
	for i := range out {
		out[i].Err = err
	}
	return out
}

// Renewer is implemented by drivers that renew many locks in few round trips.
type Renewer interface {
	// Renew extends every lease, returning one result per lease in order.
	Renew(ctx context.Context, leases []Lease) []RenewResult
}

// EventKind tells what an Event reports.
type EventKind int

const (
	// Released reports that a lock was released in the store, so that
	// waiters may try again at once.
	Released EventKind = iota + 1
	// Lost reports that the lock held by Token is no longer held (for
	// example its session's connection broke).
	Lost
)

// String returns the kind's name.
func (k EventKind) String() string {
	switch k {
	case Released:
		return "released"
	case Lost:
		return "lost"
	default:
		return "unknown"
	}
}

// Event is pushed by a Subscriber.
type Event struct {
	Kind EventKind
	// Key is the lock's key (prefix included).
	Key string
	// Token is the holder that lost the lock (Lost only).
	Token string
}

// Subscriber is implemented by drivers that push events.
type Subscriber interface {
	// Subscribe calls fn for every event until cancel is called or the
	// driver is closed. fn must not block, nor call cancel or the
	// driver's Close, which may wait for fn to return; it may be called
	// from any goroutine. A driver needs only one subscription per component. Events
	// are hints: waiters still poll, so a lost event costs at most a retry
	// delay.
	Subscribe(ctx context.Context, fn func(Event)) (cancel func(), err error)
}

// LockInfo describes a held lock.
type LockInfo struct {
	Token string
	Fence uint64
	// TTL is the remaining time to live; zero for locks that do not expire.
	TTL time.Duration
	// Holder is set, when Token is empty, by stores that do not keep the
	// token of another session's lock but show who holds it (PostgreSQL
	// and MySQL advisory locks): the part of the holder's token that names it, from
	// its first '~' to its last, exclusive ("~app~host~pid" for a token
	// made by a component.Mutex).
	Holder string
}

// Handoverer is implemented by drivers that can pass a held lock from its
// token to a new one in one operation: the component then gives a lock it
// releases straight to its own next waiter for the name (one round trip,
// one write, instead of a release and an acquisition).
//
// Handover reports released when token held key (it no longer does), and
// res.Acquired when next.Token holds key now, for next.TTL, with res.Fence
// greater than the previous holder's. A driver must not hand a lock over
// while other waiters of its store queue for it (other processes, other
// drivers): it then releases the lock instead (released true, res.Acquired
// false) and wakes them as Release would, so that a component with waiters
// of its own cannot keep a lock away from the others. A driver that cannot
// see its store's waiters (no queue of them in the store) must always
// release instead, or not implement Handoverer.
type Handoverer interface {
	Handover(ctx context.Context, key, token string, next AcquireRequest) (released bool, res AcquireResult, err error)
}

// Inspector is implemented by drivers that can describe a held lock.
type Inspector interface {
	// Inspect returns the lock's holder, or ok false when it is free.
	Inspect(ctx context.Context, key string) (info LockInfo, ok bool, err error)
}

// Features are static properties of a driver.
type Features struct {
	// Expiring: locks expire TTL after their last acquire or extend unless
	// renewed. False for session locks (advisory locks), which end with their
	// connection.
	Expiring bool
	// ServerTime: expiries are computed with the store's clock, never the
	// client's.
	ServerTime bool
	// Fencing: AcquireResult.Fence grows with every acquisition.
	Fencing bool
	// BlockingWait: Acquire honours AcquireRequest.Wait by blocking in the
	// store, so the component retries at once instead of sleeping.
	BlockingWait bool
	// InProcess: the store lives in this process and its calls never block
	// on I/O, so the component skips the per-attempt deadline it otherwise
	// sets (a context and a timer per attempt).
	InProcess bool
	// Scope says who shares the locks, for logs and docs: "process", "host",
	// "server", "cluster".
	Scope string
	// MinTTL is the shortest ttl the driver can serve: the component
	// renews a lock every ttl/3 and loses it at its expiry less a margin,
	// so a ttl must leave room for a renewal's round trip and a retry on
	// a loaded host. Shorter ttls are refused (config, New, WithTTL,
	// Extend). Zero means the component's own floor, 10 ms: in-process
	// stores (memory) and local ones (file). Networked stores declare a
	// floor from their renewal's cost: 250 ms for Redis (one script call
	// per renewal batch: renewals every 83 ms, 237 ms to the tracked
	// expiry, room for a slow call and two retries), 500 ms for PostgreSQL
	// and MySQL (a statement per renewal, and a commit with a WAL/redo
	// flush in table mode, which takes tens of milliseconds on a busy
	// server: renewals every 167 ms, 485 ms to the expiry), 1 s for etcd
	// (its leases count whole seconds).
	MinTTL time.Duration
}

// Describer is implemented by drivers that state their Features. A driver
// that does not is taken as expiring, with fencing, client time, scope
// unknown.
type Describer interface {
	Features() Features
}

// FeaturesOf returns d's features, or the default for drivers without
// Describer.
func FeaturesOf(d Driver) Features {
	if f, ok := d.(Describer); ok {
		return f.Features()
	}
	return Features{Expiring: true, Fencing: true}
}

// SQLDriver is what the SQL stores' drivers (MySQL / MariaDB, PostgreSQL)
// implement in every mode: locks with renewal in batches, events, the
// lock's description and inspection, health checks and the server's
// clock. A mode's further capabilities are found by type assertion.
type SQLDriver interface {
	Driver
	Renewer
	Subscriber
	Describer
	Inspector
	Pinger
	ServerClock
}
