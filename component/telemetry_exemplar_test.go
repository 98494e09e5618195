package component_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

// TestAcquireExemplar checks the exemplars of the acquire wait and of the
// hold under the SDK's default (trace-based) exemplar filter: the trace of
// the Acquire's caller when its context carries a sampled span, recording
// (a child span is made) or not (a remote parent, no span made), and none
// without a sampled span. The hold's is the acquiring caller's, though
// Release is called with no span.
func TestAcquireExemplar(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3},
		SpanID:     trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
	unsampled := remote.WithTraceFlags(0)
	for _, tc := range []struct {
		name      string
		ctx       func() (context.Context, trace.TraceID)
		exemplars int
	}{
		{name: "no span", ctx: func() (context.Context, trace.TraceID) { return context.Background(), trace.TraceID{} }},
		{name: "recording span", exemplars: 1, ctx: func() (context.Context, trace.TraceID) {
			ctx, span := tp.Tracer("app").Start(context.Background(), "request")
			t.Cleanup(func() { span.End() })
			return ctx, span.SpanContext().TraceID()
		}},
		{name: "sampled remote parent", exemplars: 1, ctx: func() (context.Context, trace.TraceID) {
			return trace.ContextWithRemoteSpanContext(context.Background(), remote), remote.TraceID()
		}},
		{name: "unsampled remote parent", ctx: func() (context.Context, trace.TraceID) {
			return trace.ContextWithRemoteSpanContext(context.Background(), unsampled), trace.TraceID{}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			m := newMutex(t, component.Options{Driver: memory.New(), MeterProvider: mp, TracerProvider: tp})
			ctx, traceID := tc.ctx()
			l, err := m.Acquire(ctx, "order:42")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := collect(t, reader)
			for _, name := range []string{component.MetricAcquireDuration, component.MetricHoldDuration} {
				h, ok := got[name].(metricdata.Histogram[float64])
				if !ok || len(h.DataPoints) != 1 {
					t.Fatalf("%s: %+v", name, got[name])
				}
				ex := h.DataPoints[0].Exemplars
				if len(ex) != tc.exemplars {
					t.Fatalf("%s: %d exemplars, want %d: %+v", name, len(ex), tc.exemplars, ex)
				}
				if len(ex) == 1 && trace.TraceID(ex[0].TraceID) != traceID {
					t.Errorf("%s: exemplar of trace %x, want the caller's %s", name, ex[0].TraceID, traceID)
				}
			}
		})
	}
}
