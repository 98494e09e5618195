package component

import (
	"cmp"
	"fmt"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// Defaults of Options.
const (
	DefaultName       = "mutex"
	DefaultPrefix     = "mutex:"
	DefaultTTL        = 30 * time.Second
	DefaultTimeout    = 10 * time.Second
	DefaultRetryDelay = 50 * time.Millisecond
	// DefaultMaxNameLength is the longest lock name by default, in bytes.
	DefaultMaxNameLength = 1024

	// maxRetryDelay caps the doubling of the retry delay.
	maxRetryDelay = time.Second
	// attemptGrace is the least time one store attempt is given to answer,
	// even past the wait's deadline.
	attemptGrace = time.Second
)

// MaxTTL is the longest ttl a lock may have: a hundred years, far from the
// overflow of time.Duration (292 years) in sums of timeouts.
const MaxTTL = 100 * 365 * 24 * time.Hour

// Timeouts with a special meaning.
const (
	// Forever waits without limit (any negative timeout does).
	Forever time.Duration = -1
	// NoWait makes a single attempt (a timeout of one nanosecond: one
	// attempt, given its grace second to answer); "nowait" in
	// configuration. A zero timeout is not set, never one attempt.
	NoWait time.Duration = 1
)

// Options configure a Mutex. Every field but Driver may be left zero for
// the defaults below.
type Options struct {
	// Driver is the store holding the locks. Required by New;
	// mutexfx.New makes a private memory store when it is nil.
	Driver drivers.Driver

	// Name names the store in logs and errors.
	// Default: "mutex".
	Name string

	// Prefix is added before every lock name in the store; it keeps apart
	// the applications sharing a store. Components with the same store and
	// prefix share their locks.
	// Default: "mutex:".
	Prefix string

	// TTL is how long a lock stays held without a renewal. The Mutex renews
	// held locks every TTL/3, so a lock only expires when its holder is gone
	// or cannot reach the store. From the driver's floor
	// (drivers.Features.MinTTL: 10 ms for memory and file, 250 ms for
	// Redis, 500 ms for PostgreSQL and MySQL) to 100 years.
	// Default: 30 s.
	TTL time.Duration

	// Timeout bounds Acquire's wait. Zero means not set: the default. A
	// negative value (Forever) waits without limit; NoWait makes one
	// attempt. The same rule holds for WithTimeout and the timeout
	// configuration key: zero is never "one attempt".
	// Default: 10 s.
	Timeout time.Duration

	// RetryDelay is the delay before the second attempt of a wait; it
	// doubles after each attempt up to 1 s (a RetryDelay above 1 s stays
	// as it is), each delay drawn at random between its half and its whole. Wake-ups from stores that push them
	// cut it short. Must not be negative.
	// Default: 50 ms.
	RetryDelay time.Duration

	// MaxNameLength is the longest lock name, in bytes (the prefix not
	// counted); a longer one is refused with ErrNameTooLong. It bounds
	// what each name may cost the store (a Redis fence key, a table row).
	// Must not be negative.
	// Default: 1024.
	MaxNameLength int

	// Logger logs lost locks, failing renewals and store errors, with the
	// store and lock names (never credentials), and at debug level when
	// the store's wake-ups are subscribed.
	// Default: no logging.
	Logger *zap.Logger

	// Application names this program in the holder identity that every
	// lock records (see Holder); characters other than letters, digits,
	// '.', '_' and '-' become '_', and it is cut to 32 bytes.
	// Default: the base name of the running binary.
	Application string

	// MeterProvider records the Mutex's metrics (docs/telemetry.md).
	// Default: otel.GetMeterProvider(), a no-op until the application
	// sets one.
	MeterProvider metric.MeterProvider

	// TracerProvider records the spans of Acquire, Do and Release (see
	// TraceAll).
	// Default: otel.GetTracerProvider(), a no-op until the application
	// sets one.
	TracerProvider trace.TracerProvider

	// DriverType names the driver in metrics and spans (mutexfx.driver).
	// Default: the name of the driver's package ("memory", "redis").
	DriverType string

	// LockNameAttribute adds the lock name (mutexfx.lock) to metrics and
	// spans. Off by default: lock names are unbounded ("order:42"), and
	// every distinct name would make a time series of its own.
	LockNameAttribute bool

	// TraceAll starts a span for every Acquire, Do and Release. By
	// default one is started only when the caller's ctx carries a
	// recording span (a request's trace then shows its lock wait), so
	// that background work traced by nobody makes no root spans.
	TraceAll bool
}

// Validate checks o as New does, without building anything: the TTL
// (from 10 ms, or the floor of o.Driver when it is set, to 100 years), a
// RetryDelay and MaxNameLength not negative. Zero fields are valid: they
// take the defaults. The error is an *OptionError naming the field.
// Package config checks each store's block with it.
func (o Options) Validate() error {
	switch {
	case o.TTL == Forever:
		return &OptionError{Field: "TTL", Msg: "cannot be infinite: use a long ttl; locks are renewed"}
	case o.TTL < 0:
		return &OptionError{Field: "TTL", Msg: "must be positive"}
	case o.TTL > 0:
		if err := checkTTL(o.TTL); err != nil {
			return err
		}
		if o.Driver != nil {
			if err := checkMinTTL(o.TTL, drivers.FeaturesOf(o.Driver).MinTTL, o); err != nil {
				return err
			}
		}
	}
	if o.RetryDelay < 0 {
		return &OptionError{Field: "RetryDelay", Msg: "must not be negative"}
	}
	if o.MaxNameLength < 0 {
		return &OptionError{Field: "MaxNameLength", Msg: "must not be negative"}
	}
	return nil
}

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	o.Name = cmp.Or(o.Name, DefaultName)
	if err := o.Validate(); err != nil {
		return o, err
	}
	if o.Driver == nil {
		return o, &OptionError{Field: "Driver", Msg: "required (mutexfx.New makes a private memory store when it is nil)"}
	}
	o.MaxNameLength = cmp.Or(o.MaxNameLength, DefaultMaxNameLength)
	o.Prefix = cmp.Or(o.Prefix, DefaultPrefix)
	o.TTL = cmp.Or(o.TTL, DefaultTTL)
	o.Timeout = cmp.Or(o.Timeout, DefaultTimeout)
	o.RetryDelay = cmp.Or(o.RetryDelay, DefaultRetryDelay)
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o, nil
}

// AcquireOption overrides an option of one acquisition. A nil
// AcquireOption is ignored.
type AcquireOption func(*acquireOptions)

type acquireOptions struct {
	ttl     time.Duration
	timeout time.Duration
	err     error
}

// checkTTL checks a ttl: from 10 ms to 100 years.
func checkTTL(ttl time.Duration) error {
	switch {
	case ttl < 10*time.Millisecond:
		return &OptionError{Field: "TTL", Msg: "must be at least 10ms"}
	case ttl > MaxTTL:
		return &OptionError{Field: "TTL", Msg: "must be at most 100 years"}
	}
	return nil
}

// WithTTL sets the lock's time to live (the driver's floor, at least 10 ms,
// to 100 years) instead of the Mutex's TTL.
func WithTTL(ttl time.Duration) AcquireOption {
	return func(o *acquireOptions) {
		if err := checkTTL(ttl); err != nil {
			o.err = err
			return
		}
		o.ttl = ttl
	}
}

// WithTimeout sets how long Acquire waits instead of the Mutex's Timeout:
// NoWait makes one attempt, a negative value (Forever) waits without
// limit. Zero is refused with an *OptionError: a timeout of zero means "not
// set" (Options.Timeout), and the way not to set one here is to leave the
// option out.
func WithTimeout(timeout time.Duration) AcquireOption {
	return func(o *acquireOptions) {
		if timeout == 0 {
			o.err = &OptionError{Field: "Timeout", Msg: "zero is not a timeout: NoWait makes one attempt; leave WithTimeout out for the Mutex's Timeout"}
			return
		}
		o.timeout = timeout
	}
}

func (m *Mutex) acquireOptions(opts []AcquireOption) (acquireOptions, error) {
	if len(opts) == 0 {
		return acquireOptions{ttl: m.opts.TTL, timeout: m.opts.Timeout}, nil
	}
	o := &acquireOptions{ttl: m.opts.TTL, timeout: m.opts.Timeout}
	for _, f := range opts {
		if f != nil { // a nil option (built conditionally) sets nothing
			f(o)
		}
	}
	if o.err == nil {
		o.err = m.checkMinTTL(o.ttl)
	}
	return *o, o.err
}

// checkMinTTL refuses a ttl shorter than the driver's floor
// (drivers.Features.MinTTL).
func (m *Mutex) checkMinTTL(ttl time.Duration) error {
	return checkMinTTL(ttl, m.feat.MinTTL, m.opts)
}

// checkMinTTL refuses a ttl shorter than floor, naming the driver of o.
func checkMinTTL(ttl, floor time.Duration, o Options) error {
	if ttl < floor {
		driver := cmp.Or(o.DriverType, driverType(o.Driver))
		return &OptionError{Field: "TTL", Msg: fmt.Sprintf("must be at least %v for driver %q: the shortest ttl it can serve (%s)", floor, driver, MinTTLReason)}
	}
	return nil
}

// MinTTLReason says why a driver has a ttl floor, for errors.
const MinTTLReason = "a lock is renewed every ttl/3, and a renewal needs a round trip to the store and room for a retry"

// drift is the margin by which the Mutex considers a lock expired before the
// store does: ttl/100 for clock drift between client and store (as Redlock
// does), and 10 ms (ttl/10 for ttls under 100 ms) for the timer that tells
// the holder to fire late on a busy machine (2 ms, Redlock's constant, was
// seen overrun under a loaded parallel test run: drivertest's
// LostWhenStoreStalls).
func drift(ttl time.Duration) time.Duration {
	return ttl/100 + min(10*time.Millisecond, ttl/10)
}
