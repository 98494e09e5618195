package component_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mutexfx/mutexfx/component"
)

// TestSpansFollowTheCaller checks when spans are made: by default only
// under a recording span of the caller, as its children; with TraceAll
// always.
func TestSpansFollowTheCaller(t *testing.T) {
	for _, tc := range []struct {
		name     string
		traceAll bool
		parent   bool
		want     []string // span names, in the order they end
	}{
		{name: "no parent", want: nil},
		{name: "parent", parent: true, want: []string{"mutexfx.acquire", "mutexfx.release", "mutexfx.acquire", "mutexfx.release", "mutexfx.do"}},
		{name: "traceAll", traceAll: true, want: []string{"mutexfx.acquire", "mutexfx.release", "mutexfx.acquire", "mutexfx.release", "mutexfx.do"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
			m := newMutex(t, component.Options{Name: "orders", TracerProvider: tp, TraceAll: tc.traceAll})
			ctx := context.Background()
			var parent trace.Span
			if tc.parent {
				ctx, parent = tp.Tracer("app").Start(ctx, "request")
			}
			l, err := m.Acquire(ctx, "order:42")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := m.Do(ctx, "order:42", func(context.Context, *component.Lock) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if parent != nil {
				parent.End()
			}
			var got []string
			for _, s := range spans.Ended() {
				if s.Name() == "request" {
					continue
				}
				got = append(got, s.Name())
				switch {
				case tc.parent && s.Parent().TraceID() != parent.SpanContext().TraceID():
					t.Errorf("span %s is not in the caller's trace", s.Name())
				case !tc.parent && s.Name() == "mutexfx.do" && s.Parent().IsValid():
					t.Errorf("span %s has a parent, want a root", s.Name())
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("spans %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("spans %v, want %v", got, tc.want)
				}
			}
		})
	}
}
