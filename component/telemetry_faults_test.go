package component_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/mutexfx/mutexfx/component"
)

// TestTelemetryFaults checks the instruments of failures: renewals that
// fail until the lock expires (failures, an error round trip, a loss by
// expiry), a failed Extend (a store error), and a lock the store dropped
// found gone by its renewal (a loss gone_or_taken).
func TestTelemetryFaults(t *testing.T) {
	component.Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		f := newFaulty()
		m, err := component.New(component.Options{Driver: f, Name: "orders", TTL: 300 * time.Millisecond,
			MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		defer m.Close(ctx)

		boom := errors.New("store down")
		f.set(func(f *faulty) { f.renewErr = boom })
		l, err := m.Acquire(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Extend(ctx, time.Second); !errors.Is(err, component.ErrDriver) {
			t.Fatalf("Extend: %v, want a store error", err)
		}
		<-l.Done()
		if !errors.Is(l.Err(), component.ErrLost) {
			t.Fatalf("lock ended with %v, want lost", l.Err())
		}
		f.set(func(f *faulty) { f.renewErr = nil })

		gone, err := m.Acquire(ctx, "b")
		if err != nil {
			t.Fatal(err)
		}
		f.Revoke(gone.Key()) // no event (faulty does not subscribe): the renewal finds it
		<-gone.Done()

		c := collect(t, reader)
		for _, tc := range []struct {
			name, key, value string
			want             int64
		}{
			{component.MetricLosses, "mutexfx.cause", component.CauseExpired, 1},
			{component.MetricLosses, "mutexfx.cause", component.CauseGoneOrTaken, 1},
			{component.MetricStoreErrors, "mutexfx.op", "extend", 1},
		} {
			if got := c.sum(t, tc.name, attrKey(tc.key), tc.value); got != tc.want {
				t.Errorf("%s{%s} = %d, want %d", tc.name, tc.value, got, tc.want)
			}
		}
		failures := c.sum(t, component.MetricRenewalFailures, "", "")
		count, _ := c.histogram(t, component.MetricRenewalDuration, component.AttrOutcome, component.OutcomeError)
		// the Extend asked for a renewal at once, then retries until the
		// expiry (300 ms less drift): several, each recorded
		if failures < 2 || uint64(failures) != count {
			t.Errorf("renewal failures %d, error round trips %d: want at least 2, equal", failures, count)
		}
		if count, _ := c.histogram(t, component.MetricHoldDuration, component.AttrOutcome, component.OutcomeLost); count != 2 {
			t.Errorf("hold{lost} count %d, want 2", count)
		}
	})
}

// TestTelemetryLockName checks that LockNameAttribute adds the lock name,
// to the histograms and to the locks held observed at collection.
func TestTelemetryLockName(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m := newMutex(t, component.Options{Name: "orders", LockNameAttribute: true,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	l, err := m.Acquire(context.Background(), "order:42")
	if err != nil {
		t.Fatal(err)
	}
	c := collect(t, reader)
	h := c[component.MetricAcquireDuration].(metricdata.Histogram[float64])
	if len(h.DataPoints) != 1 {
		t.Fatalf("%d points", len(h.DataPoints))
	}
	if v, ok := h.DataPoints[0].Attributes.Value(component.AttrLock); !ok || v.AsString() != "order:42" {
		t.Errorf("lock attribute %v %v, want order:42", v, ok)
	}
	held := c[component.MetricLocksHeld].(metricdata.Sum[int64])
	if len(held.DataPoints) != 1 || held.DataPoints[0].Value != 1 {
		t.Fatalf("held points %+v, want one of 1", held.DataPoints)
	}
	if v, _ := held.DataPoints[0].Attributes.Value(component.AttrLock); v.AsString() != "order:42" {
		t.Errorf("held: lock attribute %q, want order:42", v.AsString())
	}
	l.Release(context.Background())
}
