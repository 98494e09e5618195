package mutexfx_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"
	fxt "go.uber.org/fx/fxtest"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/component"
)

// TestModuleTelemetryProviders: Module records into the meter and tracer
// providers of the fx graph, with the configured store name and driver
// type; spans under the caller's.
func TestModuleTelemetryProviders(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	var m *mutexfx.Mutex
	app := fxt.New(t,
		mutexfx.Module(yamlConfig(t, "mutex:\n  orders: {driver: {type: memory}}\n")),
		fx.Provide(
			func() metric.MeterProvider { return sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)) },
			func() trace.TracerProvider { return tp },
		),
		fx.Populate(&m),
		fx.NopLogger,
	)
	app.RequireStart()
	defer app.RequireStop()
	// spans are made under the caller's recording span (a request's)
	ctx, request := tp.Tracer("app").Start(context.Background(), "request")
	if err := m.Do(ctx, "job", func(context.Context, *mutexfx.Lock) error { return nil }); err != nil {
		t.Fatal(err)
	}
	request.End()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			if mt.Name != component.MetricAcquireDuration {
				continue
			}
			p := mt.Data.(metricdata.Histogram[float64]).DataPoints[0]
			store, _ := p.Attributes.Value(component.AttrStore)
			driver, _ := p.Attributes.Value(component.AttrDriver)
			found = p.Count == 1 && store.AsString() == "orders" && driver.AsString() == "memory"
		}
	}
	if !found {
		t.Errorf("no acquire duration point for store orders, driver memory: %+v", rm.ScopeMetrics)
	}
	names := map[string]bool{}
	for _, s := range spans.Ended() {
		names[s.Name()] = true
	}
	if !names["mutexfx.do"] || !names["mutexfx.acquire"] || !names["mutexfx.release"] {
		t.Errorf("spans %v, want do, acquire and release", names)
	}
}
