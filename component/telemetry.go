package component

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the Mutex's meter and tracer.
const ScopeName = "github.com/mutexfx/mutexfx/component"

// Metric names (see docs/telemetry.md). Durations are in seconds.
const (
	MetricAcquireDuration = "mutexfx.acquire.duration"
	MetricHoldDuration    = "mutexfx.hold.duration"
	MetricLocksHeld       = "mutexfx.locks.held"
	MetricLocksWaiting    = "mutexfx.locks.waiting"
	MetricLosses          = "mutexfx.losses"
	MetricRenewalDuration = "mutexfx.renewal.duration"
	MetricRenewalFailures = "mutexfx.renewal.failures"
	MetricStoreErrors     = "mutexfx.store.errors"
)

// Attribute keys of the metrics and spans. AttrLock is only set when
// Options.LockNameAttribute is: lock names are unbounded.
const (
	AttrStore    = attribute.Key("mutexfx.store")
	AttrDriver   = attribute.Key("mutexfx.driver")
	AttrOutcome  = attribute.Key("mutexfx.outcome")
	AttrCause    = attribute.Key("mutexfx.cause")
	AttrOp       = attribute.Key("mutexfx.op")
	AttrLock     = attribute.Key("mutexfx.lock")
	AttrWait     = attribute.Key("mutexfx.wait")
	AttrAttempts = attribute.Key("mutexfx.attempts")
	AttrFence    = attribute.Key("mutexfx.fence")
)

// Outcomes of an acquisition (MetricAcquireDuration) and of a hold
// (MetricHoldDuration).
const (
	OutcomeAcquired  = "acquired"
	OutcomeTimeout   = "timeout"
	OutcomeCancelled = "cancelled"
	OutcomeError     = "error"
	OutcomeReleased  = "released"
	OutcomeLost      = "lost"
	OutcomeClosed    = "closed"
	// OutcomeOK is a renewal call that succeeded (MetricRenewalDuration);
	// a failed one is OutcomeError.
	OutcomeOK = "ok"
)

// Causes of a loss (MetricLosses).
const (
	// CauseGoneOrTaken: a renewal or Extend found the lock no longer
	// held for its token (expired in the store, broken by force, or taken
	// by another holder after it expired).
	CauseGoneOrTaken = "gone_or_taken"
	// CauseExpired: no renewal was confirmed before the lock's tracked
	// expiry (the store was unreachable or too slow).
	CauseExpired = "expired"
	// CauseStoreReported: the store reported it lost (a session lock's
	// connection closed, the store restarted).
	CauseStoreReported = "store_reported"
)

var (
	durationBuckets = metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
	holdBuckets     = metric.WithExplicitBucketBoundaries(0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400)
)

// telemetry holds a Mutex's instruments and tracer, and the attribute sets
// of its store, computed once: recording allocates nothing unless lock
// names are recorded. A nil *telemetry records nothing (benchmarks
// measure the Mutex without telemetry with it).
type telemetry struct {
	tracer    trace.Tracer
	traceAll  bool
	lockNames bool
	store     []attribute.KeyValue // store and driver

	acquire  metric.Float64Histogram
	hold     metric.Float64Histogram
	held     metric.Int64ObservableUpDownCounter
	waiting  metric.Int64ObservableUpDownCounter
	losses   metric.Int64Counter
	renewal  metric.Float64Histogram
	failures metric.Int64Counter
	errs     metric.Int64Counter
	reg      metric.Registration // of the held and waiting callback; nil if none

	base     measure        // store and driver
	outcomes map[kv]measure // base and an outcome, a cause or an op
	// the outcomes of every uncontended acquire+release, looked up once
	acquiredM, releasedM measure
}

// kv is a key of telemetry.outcomes.
type kv struct {
	key   attribute.Key
	value string
}

// measure holds the options of a measurement as slices made once:
// passed to the instruments with ..., they cost no allocation.
type measure struct {
	add []metric.AddOption
	rec []metric.RecordOption
	obs []metric.ObserveOption
}

func newMeasure(o metric.MeasurementOption) measure {
	return measure{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}, obs: []metric.ObserveOption{o}}
}

// newTelemetry builds the instruments on the providers of o (the global
// ones when unset). Instruments that fail to build are no-ops (the OTel
// API returns them with its error). The held and waiting instruments are
// observed on collection, from counts (held and waiting per lock name, or
// in all under ""), so that holding and waiting cost nothing.
func newTelemetry(o Options, counts func() map[string][2]int64) *telemetry {
	typ := o.DriverType
	if typ == "" {
		typ = driverType(o.Driver)
	}
	mp, tp := o.MeterProvider, o.TracerProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	meter := mp.Meter(ScopeName)
	t := &telemetry{
		tracer:    tp.Tracer(ScopeName),
		traceAll:  o.TraceAll,
		lockNames: o.LockNameAttribute,
		store:     []attribute.KeyValue{AttrStore.String(o.Name), AttrDriver.String(typ)},
		outcomes:  map[kv]measure{},
	}
	t.acquire, _ = meter.Float64Histogram(MetricAcquireDuration, metric.WithUnit("s"), durationBuckets,
		metric.WithDescription("Time Acquire waited for a lock, by outcome."))
	t.hold, _ = meter.Float64Histogram(MetricHoldDuration, metric.WithUnit("s"), holdBuckets,
		metric.WithDescription("Time a lock was held, by how it ended."))
	t.held, _ = meter.Int64ObservableUpDownCounter(MetricLocksHeld, metric.WithUnit("{lock}"),
		metric.WithDescription("Locks held now."))
	t.waiting, _ = meter.Int64ObservableUpDownCounter(MetricLocksWaiting, metric.WithUnit("{waiter}"),
		metric.WithDescription("Acquire calls waiting now."))
	t.losses, _ = meter.Int64Counter(MetricLosses, metric.WithUnit("{loss}"),
		metric.WithDescription("Locks lost while held, by cause."))
	t.renewal, _ = meter.Float64Histogram(MetricRenewalDuration, metric.WithUnit("s"), durationBuckets,
		metric.WithDescription("Round trip of a renewal call to the store, by outcome."))
	t.failures, _ = meter.Int64Counter(MetricRenewalFailures, metric.WithUnit("{failure}"),
		metric.WithDescription("Renewals of a lock that failed (the store erred or did not answer)."))
	t.errs, _ = meter.Int64Counter(MetricStoreErrors, metric.WithUnit("{error}"),
		metric.WithDescription("Store calls that failed, by operation."))

	t.base = newMeasure(metric.WithAttributeSet(attribute.NewSet(t.store...)))
	for _, a := range []attribute.KeyValue{
		AttrOutcome.String(OutcomeAcquired), AttrOutcome.String(OutcomeTimeout),
		AttrOutcome.String(OutcomeCancelled), AttrOutcome.String(OutcomeError),
		AttrOutcome.String(OutcomeReleased), AttrOutcome.String(OutcomeLost), AttrOutcome.String(OutcomeClosed), AttrOutcome.String(OutcomeOK),
		AttrCause.String(CauseGoneOrTaken), AttrCause.String(CauseExpired), AttrCause.String(CauseStoreReported),
		AttrOp.String("acquire"), AttrOp.String("release"), AttrOp.String("extend"), AttrOp.String("ping"), AttrOp.String("close"),
	} {
		t.outcomes[kv{a.Key, a.Value.AsString()}] = newMeasure(metric.WithAttributeSet(attribute.NewSet(append([]attribute.KeyValue{a}, t.store...)...)))
	}
	t.acquiredM = t.outcomes[kv{AttrOutcome, OutcomeAcquired}]
	t.releasedM = t.outcomes[kv{AttrOutcome, OutcomeReleased}]
	if t.held != nil && t.waiting != nil {
		t.reg, _ = meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
			for name, c := range counts() {
				m := t.plain(name)
				obs.ObserveInt64(t.held, c[0], m.obs...)
				obs.ObserveInt64(t.waiting, c[1], m.obs...)
			}
			return nil
		}, t.held, t.waiting)
	}
	return t
}

// close unregisters the observation of held and waiting locks.
func (t *telemetry) close() {
	if t != nil && t.reg != nil {
		_ = t.reg.Unregister()
	}
}

// opts returns the measurement of key=value on this store, with the lock
// name when it is recorded.
func (t *telemetry) opts(key attribute.Key, value, lock string) measure {
	switch {
	case t.lockNames:
		return newMeasure(metric.WithAttributes(append([]attribute.KeyValue{key.String(value), AttrLock.String(lock)}, t.store...)...))
	case key == AttrOutcome && value == OutcomeAcquired:
		return t.acquiredM
	case key == AttrOutcome && value == OutcomeReleased:
		return t.releasedM
	}
	if m, ok := t.outcomes[kv{key, value}]; ok {
		return m
	}
	return newMeasure(metric.WithAttributes(append([]attribute.KeyValue{key.String(value)}, t.store...)...))
}

// plain returns the measurement of this store, with the lock name when it
// is recorded (and lock is not "").
func (t *telemetry) plain(lock string) measure {
	if t.lockNames && lock != "" {
		return newMeasure(metric.WithAttributes(append([]attribute.KeyValue{AttrLock.String(lock)}, t.store...)...))
	}
	return t.base
}

// start starts a span, a child of ctx's: by default only when ctx carries
// a recording span (a request's trace then shows its lock wait, and a
// process that traces nothing pays nothing); with Options.TraceAll always.
// Else it returns ctx and ctx's span, which records nothing: the callers
// act on a span only when it records, and ask its SpanContext whether ctx
// is worth passing to a metric's Record (see recordCtx).
func (t *telemetry) start(ctx context.Context, name string) (context.Context, trace.Span) {
	if t == nil {
		return ctx, noSpan
	}
	if parent := trace.SpanFromContext(ctx); !t.traceAll && !parent.IsRecording() {
		return ctx, parent
	}
	return t.tracer.Start(ctx, name)
}

// noSpan is the span of start when spans record nothing.
var noSpan = trace.SpanFromContext(context.Background())

// recordCtx returns the context to record a measurement made under the
// span of ctx, whose SpanContext is sc: ctx when the span is sampled, else
// the background. The SDK's default exemplar filter (trace-based) keeps an
// exemplar only for a sampled span, which it looks up in the context
// given: the background spares it walking the caller's context chain when
// no exemplar would be kept, and ctx keeps the link to a sampled caller's
// trace.
func recordCtx(ctx context.Context, sc trace.SpanContext) context.Context {
	if sc.IsSampled() {
		return ctx
	}
	return context.Background()
}

// spanAttrs returns the attributes of a span about lock name.
func (t *telemetry) spanAttrs(name string) []attribute.KeyValue {
	if t.lockNames {
		return append([]attribute.KeyValue{AttrLock.String(name)}, t.store...)
	}
	return t.store
}

// acquireOutcome classifies the result of an Acquire.
func acquireOutcome(err error) string {
	switch {
	case err == nil:
		return OutcomeAcquired
	case errors.Is(err, ErrTimeout):
		return OutcomeTimeout
	case errors.Is(err, ErrDriver):
		return OutcomeError
	}
	// ctx's end (its cause, whatever it is) or Close
	return OutcomeCancelled
}

// holdOutcome classifies the cause of a lock's end.
func holdOutcome(cause error) string {
	switch {
	case cause == ErrReleased: // Release's cause, as is: spared errors.Is
		return OutcomeReleased
	case errors.Is(cause, ErrLost):
		return OutcomeLost
	case errors.Is(cause, ErrClosed):
		return OutcomeClosed
	}
	return OutcomeReleased
}

// seconds returns d in seconds.
func seconds(d time.Duration) float64 { return d.Seconds() }

// driverType names a driver by its package ("memory", "redis"), for the
// driver attribute.
func driverType(v any) string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "none"
	}
	p := t.PkgPath()
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	if p == "" {
		return t.String()
	}
	return p
}

// counts returns the locks held and the Acquire calls waiting, per lock
// name when names are recorded, else in all under "": read by the
// telemetry's callback at each collection.
func (m *Mutex) counts() map[string][2]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.opts.LockNameAttribute {
		var waiting int
		for _, q := range m.queues {
			waiting += len(q.waiters)
		}
		return map[string][2]int64{"": {int64(len(m.held)), int64(waiting)}}
	}
	out := make(map[string][2]int64, len(m.held)+len(m.queues))
	for name := range m.held {
		c := out[name]
		c[0] = 1
		out[name] = c
	}
	for name, q := range m.queues {
		c := out[name]
		c[1] = int64(len(q.waiters))
		out[name] = c
	}
	return out
}
