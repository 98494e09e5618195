package component_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mutexfx/mutexfx/component"
)

// collected is a metrics snapshot, by instrument name.
type collected map[string]metricdata.Aggregation

func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := collected{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != component.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// attrsOf renders a data point's attributes as key=value pairs.
func attrsOf(s attribute.Set) map[string]string {
	out := map[string]string{}
	for _, kv := range s.ToSlice() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

// histogram returns the count and sum of the histogram point whose
// attribute key has value.
func (c collected) histogram(t *testing.T, name string, key attribute.Key, value string) (uint64, float64) {
	t.Helper()
	h, ok := c[name].(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s: no histogram (have %T)", name, c[name])
	}
	for _, p := range h.DataPoints {
		if v, _ := p.Attributes.Value(key); v.String() == value {
			checkStoreAttrs(t, name, p.Attributes)
			return p.Count, p.Sum
		}
	}
	return 0, 0
}

// sum returns the value of the sum point whose attribute key has value
// (key "" for the only point).
func (c collected) sum(t *testing.T, name string, key attribute.Key, value string) int64 {
	t.Helper()
	s, ok := c[name].(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s: no sum (have %T)", name, c[name])
	}
	for _, p := range s.DataPoints {
		if v, _ := p.Attributes.Value(key); key == "" || v.String() == value {
			checkStoreAttrs(t, name, p.Attributes)
			return p.Value
		}
	}
	return 0
}

// checkStoreAttrs checks a point carries the store and driver, and never
// the lock name (not opted in).
func checkStoreAttrs(t *testing.T, name string, s attribute.Set) {
	t.Helper()
	a := attrsOf(s)
	// the memory store, or faulty wrapping it
	if d := a["mutexfx.driver"]; a["mutexfx.store"] != "orders" || (d != "memory" && d != "component_test") {
		t.Errorf("%s: attributes %v, want store orders and driver memory", name, a)
	}
	if _, ok := a["mutexfx.lock"]; ok {
		t.Errorf("%s: lock name recorded without LockNameAttribute: %v", name, a)
	}
}

// TestTelemetry runs a known scenario in a synctest bubble (exact
// durations) and checks every instrument and the spans (TraceAll): an acquisition
// after a 100 ms wait, a timeout after 50 ms, a lock held 1 s (renewed),
// and a lock lost when the store drops it. Each step follows a renewal
// (renewedAt), whose time is known: every ttl/3.
func TestTelemetry(t *testing.T) {
	component.Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		spans := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
		drv := newSignalled()
		m, err := component.New(component.Options{Driver: drv, Name: "orders", TTL: 300 * time.Millisecond, MeterProvider: mp, TracerProvider: tp, TraceAll: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()

		first, err := m.Acquire(ctx, "order:42")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *component.Lock)
		go func() {
			l, err := m.Acquire(ctx, "order:42", component.WithTimeout(time.Second))
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		synctest.Wait()
		if c := collect(t, reader); c.sum(t, component.MetricLocksWaiting, "", "") != 1 || c.sum(t, component.MetricLocksHeld, "", "") != 1 {
			t.Errorf("while one waits: waiting %d held %d, want 1 and 1", c.sum(t, component.MetricLocksWaiting, "", ""), c.sum(t, component.MetricLocksHeld, "", ""))
		}
		// released at its first renewal, 100 ms after its acquisition
		if at := drv.renewedAt(t, first, 100*time.Millisecond); at != 100*time.Millisecond {
			t.Fatalf("first's renewal %v after its acquisition, want 100 ms", at)
		}
		if ok, err := first.Release(ctx); !ok || err != nil {
			t.Fatal(ok, err)
		}
		second := <-got

		// a timeout: 50 ms while second holds it
		if _, err := m.Acquire(ctx, "order:42", component.WithTimeout(50*time.Millisecond)); !errors.Is(err, component.ErrTimeout) {
			t.Fatalf("want a timeout, got %v", err)
		}

		// held a second: renewed every ttl/3, then released
		if at := drv.renewedAt(t, second, time.Second); at != time.Second {
			t.Fatalf("second's renewal %v after its acquisition, want one at 1 s", at)
		}
		if ok, err := second.Release(ctx); !ok || err != nil {
			t.Fatal(ok, err)
		}

		// lost: the store drops it
		lost, err := m.Acquire(ctx, "order:7")
		if err != nil {
			t.Fatal(err)
		}
		// just after its second renewal, at 200 ms, its answer taken in:
		// a renewal racing the revocation would find the lock gone and
		// report another cause
		if at := drv.renewedAt(t, lost, 200*time.Millisecond); at != 200*time.Millisecond {
			t.Fatalf("lost's renewal %v after its acquisition, want one at 200 ms", at)
		}
		drv.Revoke(lost.Key())
		<-lost.Done()

		c := collect(t, reader)
		for _, tc := range []struct {
			name    string
			outcome string
			count   uint64
			sum     float64
		}{
			// the first acquisition (no wait), the second (100 ms), the lost one
			{component.MetricAcquireDuration, component.OutcomeAcquired, 3, 0.1},
			{component.MetricAcquireDuration, component.OutcomeTimeout, 1, 0.05},
			{component.MetricHoldDuration, component.OutcomeReleased, 2, 0.1 + 1},
			{component.MetricHoldDuration, component.OutcomeLost, 1, 0.2},
		} {
			count, sum := c.histogram(t, tc.name, component.AttrOutcome, tc.outcome)
			if count != tc.count || !near(sum, tc.sum) {
				t.Errorf("%s{%s}: count %d sum %v, want %d and %v", tc.name, tc.outcome, count, sum, tc.count, tc.sum)
			}
		}
		if n := c.sum(t, component.MetricLosses, component.AttrCause, component.CauseStoreReported); n != 1 {
			t.Errorf("losses{store_reported} = %d, want 1", n)
		}
		if n := c.sum(t, component.MetricLocksHeld, "", ""); n != 0 {
			t.Errorf("held = %d at the end, want 0", n)
		}
		if n := c.sum(t, component.MetricLocksWaiting, "", ""); n != 0 {
			t.Errorf("waiting = %d at the end, want 0", n)
		}
		// every renewal call the store applied, each a success: second's
		// ten among them (held 1 s with a 300 ms ttl: renewed every 100 ms)
		if count, _ := c.histogram(t, component.MetricRenewalDuration, component.AttrOutcome, component.OutcomeOK); count != uint64(drv.calls.Load()) || count < 10 {
			t.Errorf("renewals recorded: %d, want %d (the store's calls), 10 of them second's", count, drv.calls.Load())
		}

		if err := m.Close(ctx); err != nil {
			t.Fatal(err)
		}
		checkSpans(t, spans.Ended())
	})
}

// checkSpans checks the acquire and release spans of TestTelemetry.
func checkSpans(t *testing.T, ended []sdktrace.ReadOnlySpan) {
	t.Helper()
	var acquires, timeouts, releases int
	for _, s := range ended {
		a := attrsOf(attribute.NewSet(s.Attributes()...))
		if _, ok := a["mutexfx.lock"]; ok {
			t.Errorf("span %s records the lock name: %v", s.Name(), a)
		}
		switch s.Name() {
		case "mutexfx.acquire":
			acquires++
			if a["mutexfx.outcome"] == component.OutcomeTimeout {
				timeouts++
				if s.Status().Code != codes.Error {
					t.Errorf("timed out acquire span status %v, want Error", s.Status())
				}
				continue
			}
			if a["mutexfx.fence"] == "" || a["mutexfx.attempts"] == "" {
				t.Errorf("acquire span attributes %v: no fence or attempts", a)
			}
			if a["mutexfx.fence"] == "2" && a["mutexfx.wait"] != "0.1" {
				t.Errorf("the second acquisition's span: wait %s, want 0.1", a["mutexfx.wait"])
			}
		case "mutexfx.release":
			releases++
		}
	}
	if acquires != 4 || timeouts != 1 || releases != 2 {
		t.Errorf("spans: %d acquire (%d timed out), %d release; want 4 (1), 2", acquires, timeouts, releases)
	}
}

func attrKey(k string) attribute.Key { return attribute.Key(k) }

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
