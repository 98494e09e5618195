package synchronized

import (
	"context"
	"errors"
	"fmt"
	"go.uber.org/zap"
	"net/http"
	"time"

	"github.com/mutexfx/mutexfx/component"
)

// Resolver finds a lock store by name. *mutexfx.Registry implements it.
type Resolver interface {
	Get(name string) (*component.Mutex, error)
}

// defaulter is implemented by resolvers that know a default store
// (*mutexfx.Registry does).
type defaulter interface {
	Default() (*component.Mutex, error)
}

// ErrNoStore reports Options that name no usable lock store.
var ErrNoStore = errors.New("synchronized: no lock store")

// Options configure the HTTP middleware and the action wrapper. The store is
// Mutex, else Resolver.Get(Store), else the Resolver's default store; it is
// resolved once, at construction.
type Options struct {
	// Mutex is the lock store.
	// Default: resolved from Resolver.
	Mutex *component.Mutex

	// Store names the store to get from Resolver when Mutex is nil.
	// Default: the Resolver's default store (a *mutexfx.Registry's
	// Default()).
	Store string

	// Resolver finds Store; a *mutexfx.Registry from the fx module.
	// Default: none (Mutex is then required).
	Resolver Resolver

	// Timeout bounds the wait for the lock. A negative value
	// (component.Forever) waits without limit.
	// Default: the store's timeout (10 s unless configured).
	Timeout time.Duration

	// NoWait fails at once (409 for HTTP, ErrTimeout for actions) when the
	// lock is held, instead of waiting: the reference design's wait: false.
	// Default: false (wait up to Timeout).
	NoWait bool

	// TTL is the lock's time to live, from the store's floor (10 ms for
	// memory and file, 250 ms for Redis, 500 ms for PostgreSQL and MySQL,
	// 1 s for etcd) to 100 years; it is renewed while the work runs.
	// Default: the store's ttl (30 s unless configured).
	TTL time.Duration

	// MaxBodyBytes bounds the request body JSONMiddleware reads (HTTP
	// only): a larger body is answered 413.
	// Default: 1 MiB.
	MaxBodyBytes int64

	// Logger logs the requests answered 500 because the lock name
	// template does not fit the route (HTTP only).
	// Default: no logging.
	Logger *zap.Logger

	// ErrorHandler writes the HTTP response when no lock could be taken
	// (HTTP middleware only). It is not called when the client went away
	// (the request's ctx cancelled without a cause); it is, with an error
	// wrapping ErrRequestEnded, when the ctx ended otherwise (a deadline).
	// Default: WriteProblem (409, 400 or 503 with a JSON problem body).
	ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)
}

// locker is the validated form of Options.
type locker struct {
	m      *component.Mutex
	opts   []component.AcquireOption
	noWait bool
	onErr  func(http.ResponseWriter, *http.Request, error)
	log    *zap.Logger
}

func (o Options) locker() (*locker, error) {
	m := o.Mutex
	if m == nil {
		var err error
		switch {
		case o.Resolver == nil:
			return nil, fmt.Errorf("%w: set Options.Mutex or Options.Resolver", ErrNoStore)
		case o.Store != "":
			m, err = o.Resolver.Get(o.Store)
		default:
			d, ok := o.Resolver.(defaulter)
			if !ok {
				return nil, fmt.Errorf("%w: set Options.Store: the resolver has no default store", ErrNoStore)
			}
			m, err = d.Default()
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoStore, err)
		}
		if m == nil {
			return nil, fmt.Errorf("%w: the resolver returned no store for %q", ErrNoStore, o.Store)
		}
	}
	if o.TTL != 0 && o.TTL < 10*time.Millisecond {
		return nil, &component.OptionError{Field: "TTL", Msg: "must be at least 10ms"}
	}
	if o.TTL > component.MaxTTL {
		return nil, &component.OptionError{Field: "TTL", Msg: "must be at most 100 years"}
	}
	if floor := m.Features().MinTTL; o.TTL != 0 && o.TTL < floor {
		// else every acquisition would fail with this error (500 for HTTP)
		return nil, &component.OptionError{Field: "TTL",
			Msg: fmt.Sprintf("must be at least %v for store %q: the shortest ttl it can serve", floor, m.Name())}
	}
	if o.MaxBodyBytes < 0 {
		return nil, &component.OptionError{Field: "MaxBodyBytes", Msg: "must not be negative"}
	}
	l := &locker{m: m, noWait: o.NoWait, onErr: o.ErrorHandler, log: o.Logger}
	if l.log == nil {
		l.log = zap.NewNop()
	}
	if l.onErr == nil {
		l.onErr = WriteProblem
	}
	if o.TTL != 0 {
		l.opts = append(l.opts, component.WithTTL(o.TTL))
	}
	if o.Timeout != 0 && !o.NoWait {
		l.opts = append(l.opts, component.WithTimeout(o.Timeout))
	}
	return l, nil
}

// acquire takes the lock name: one attempt with NoWait, else a wait. A
// name longer than the store takes is an input that cannot name a lock
// (ErrLockName, 400 for HTTP), as an empty one is.
func (l *locker) acquire(ctx context.Context, name string) (*component.Lock, error) {
	var lock *component.Lock
	var err error
	if l.noWait {
		lock, err = l.m.TryAcquire(ctx, name, l.opts...)
	} else {
		lock, err = l.m.Acquire(ctx, name, l.opts...)
	}
	switch {
	case errors.Is(err, component.ErrNameTooLong):
		err = fmt.Errorf("%w: %w", ErrLockName, err)
	case l.noWait && errors.Is(err, component.ErrLocked):
		// ErrTimeout too: a wait of no time ran out (409 for HTTP)
		err = fmt.Errorf("%w: no wait: %w", component.ErrTimeout, err)
	}
	return lock, err
}

// LockFrom returns the lock held for the running handler or action, or nil.
// Its Context ends when the lock is lost; so does the handler's ctx.
func LockFrom(ctx context.Context) *component.Lock { return component.LockFrom(ctx) }
