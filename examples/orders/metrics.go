package main

import (
	"context"
	"net/http"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/fx"
)

// MetricsHandler serves the service's metrics, mutexfx's included, in the
// Prometheus text format at GET /metrics.
type MetricsHandler struct{ http.Handler }

// NewMetrics builds the OpenTelemetry meter provider of the service,
// exported for Prometheus through a registry of its own. mutexfx.Module
// takes the metric.MeterProvider from the graph: the lock metrics
// (docs/telemetry.md) appear at /metrics with no further wiring.
func NewMetrics(lc fx.Lifecycle) (metric.MeterProvider, *MetricsHandler, error) {
	reg := prom.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	lc.Append(fx.StopHook(func(ctx context.Context) error { return mp.Shutdown(ctx) }))
	return mp, &MetricsHandler{promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}, nil
}
