package mutexfx_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"
	fxt "go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/drivers/mysql"
	"github.com/mutexfx/mutexfx/drivers/postgres"
	"github.com/mutexfx/mutexfx/drivers/redis"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestNoCredentialInTelemetry: a password in a store's configuration
// reaches no log line, metric point or span (traceAll), whether the store
// accepts it (PostgreSQL, trust auth) or refuses every call (Redis and
// MySQL, which have no such user or password), through acquisitions, Do,
// Inspect, ForceRelease and the health check.
func TestNoCredentialInTelemetry(t *testing.T) {
	const secret = "s3cret-Pa55"
	drivers, err := testutil.CredentialDrivers(secret)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("mutex:\n  pg: {driver: %s, traceAll: true}\n  rd: {driver: %s, traceAll: true}\n  my: {driver: %s, traceAll: true}\n",
		drivers["postgres"], drivers["redis"], drivers["mysql"])

	core, logs := observer.New(zapcore.DebugLevel)
	reader := sdkmetric.NewManualReader()
	spans := tracetest.NewSpanRecorder()
	var reg *mutexfx.Registry
	app := fxt.New(t,
		mutexfx.Module(yamlConfig(t, cfg), mutexfx.WithDrivers(redis.Factory(), postgres.Factory(), mysql.Factory())),
		fx.Supply(zap.New(core)),
		fx.Provide(
			func() metric.MeterProvider { return sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)) },
			func() trace.TracerProvider { return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)) },
		),
		fx.Populate(&reg),
		fx.NopLogger,
	)
	app.RequireStart()

	ctx := context.Background()
	name := "secret-" + t.Name()
	for _, store := range []string{"pg", "rd", "my"} {
		m, err := reg.Get(store)
		if err != nil {
			t.Fatal(err)
		}
		l, err := m.Acquire(ctx, name, mutexfx.WithTimeout(300*time.Millisecond))
		if (err == nil) != (store == "pg") {
			t.Errorf("%s: acquire error %v, want success only on pg", store, err)
		}
		if l != nil {
			_, _, _ = m.Inspect(ctx, name)
			_, _ = m.ForceRelease(ctx, name)
			_, _ = l.Release(ctx)
		}
		_ = m.Do(ctx, name, func(context.Context, *mutexfx.Lock) error { return nil }, mutexfx.WithTimeout(mutexfx.NoWait))
	}
	_, _ = reg.Check(ctx)
	app.RequireStop()

	var seen strings.Builder
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	failed := 0
	for _, e := range logs.All() {
		buf, err := enc.EncodeEntry(e.Entry, e.Context)
		if err != nil {
			t.Fatal(err)
		}
		seen.Write(buf.Bytes())
		buf.Free()
		if e.Message == "mutex store failed" {
			failed++
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	points := 0
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			points++
			fmt.Fprintf(&seen, "%s %+v\n", mt.Name, mt.Data)
		}
	}
	for _, s := range spans.Ended() {
		fmt.Fprintf(&seen, "%s %v %v %v\n", s.Name(), s.Attributes(), s.Events(), s.Status())
	}
	// not vacuous: the refusing stores' failures were logged, and metrics
	// and spans recorded
	if failed == 0 || points == 0 || len(spans.Ended()) < 6 {
		t.Fatalf("%d store failures logged, %d metrics, %d spans: the scenario recorded too little", failed, points, len(spans.Ended()))
	}
	if i := strings.Index(seen.String(), secret); i >= 0 {
		t.Errorf("the password reached the telemetry: ...%s...", seen.String()[max(0, i-200):i])
	}
}
