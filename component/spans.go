package component

import (
	"context"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Span names (see docs/telemetry.md).
const (
	spanAcquire = "mutexfx.acquire"
	spanDo      = "mutexfx.do"
	spanRelease = "mutexfx.release"
)

// acquired records an Acquire that started at start and made attempts
// store attempts: its wait in the histogram, and its span, which it ends.
func (t *telemetry) acquired(ctx context.Context, span trace.Span, name string, start time.Time, attempts int, l *Lock, err error) {
	if t == nil {
		return
	}
	sc := span.SpanContext()
	if l != nil && sc.IsSampled() {
		t.traceHold(l, sc)
	}
	recording := span.IsRecording()
	if !recording && !t.acquire.Enabled(ctx) {
		return
	}
	wait := time.Since(start)
	outcome := acquireOutcome(err)
	t.acquire.Record(recordCtx(ctx, sc), seconds(wait), t.opts(AttrOutcome, outcome, name).rec...)
	if recording {
		span.SetAttributes(t.spanAttrs(name)...)
		span.SetAttributes(AttrOutcome.String(outcome), AttrWait.Float64(seconds(wait)), AttrAttempts.Int(attempts))
		if l != nil {
			span.SetAttributes(AttrFence.Int64(int64(l.fence)))
		}
		if err != nil {
			t.recordError(span, err)
			span.SetStatus(codes.Error, outcome)
		}
		span.End()
	}
}

// traceHold keeps on l the sampled span sc of the Acquire that got it,
// so that the hold's exemplar links to the trace that held the lock
// however it ends (a Release, a loss seen by the renewal, Close). A hold
// that ends before this runs has no link.
func (t *telemetry) traceHold(l *Lock, sc trace.SpanContext) {
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	l.m.mu.Lock()
	l.traced = ctx
	l.m.mu.Unlock()
}

// ended records the end of l's hold, for cause; m.mu held.
func (t *telemetry) ended(l *Lock, cause error) {
	if t == nil || !t.hold.Enabled(context.Background()) {
		return
	}
	ctx := l.traced
	if ctx == nil {
		ctx = context.Background()
	}
	t.hold.Record(ctx, seconds(time.Since(l.acquiredAt)), t.opts(AttrOutcome, holdOutcome(cause), l.name()).rec...)
}

// lost counts the loss of l, for cause (a Cause constant).
func (t *telemetry) lost(l *Lock, cause string) {
	if t != nil {
		t.losses.Add(context.Background(), 1, t.opts(AttrCause, cause, l.name()).add...)
	}
}

// storeError counts a failed store call op (acquire, release, extend,
// ping) about lock name.
func (t *telemetry) storeError(op, name string) {
	if t != nil {
		t.errs.Add(context.Background(), 1, t.opts(AttrOp, op, name).add...)
	}
}

// renewFailed counts a failed renewal of l.
func (t *telemetry) renewFailed(l *Lock) {
	if t != nil {
		t.failures.Add(context.Background(), 1, t.plain(l.name()).add...)
	}
}

// endSpan ends a span of an operation on name that returned err.
func (t *telemetry) endSpan(span trace.Span, name string, err error) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(t.spanAttrs(name)...)
	if err != nil {
		t.recordError(span, err)
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

// recordError records err on span, as an exception event; only when lock
// names are recorded, since the error's message names the lock.
func (t *telemetry) recordError(span trace.Span, err error) {
	if t.lockNames {
		span.RecordError(err)
	}
}

// renewed records the round trip of a renewal call started at start.
func (t *telemetry) renewed(start time.Time, results []drivers.RenewResult) {
	if t == nil {
		return
	}
	outcome := OutcomeOK
	for _, r := range results {
		if r.Err != nil {
			outcome = OutcomeError
			break
		}
	}
	t.renewal.Record(context.Background(), seconds(time.Since(start)), t.outcomes[kv{AttrOutcome, outcome}].rec...)
}
