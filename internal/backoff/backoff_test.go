package backoff

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestNext: each delay is drawn from [d/2, d] of its step, the steps
// doubling from Start up to Cap, and Reset goes back to Start.
func TestNext(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name   string
		policy Policy
		steps  []time.Duration // the undrawn delay d of each call of Next
	}{
		{"zero is the default", Policy{}, []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}},
		{"Default", Default, []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second}},
		{"custom", Policy{Start: 20 * time.Microsecond, Cap: ms}, []time.Duration{20 * time.Microsecond, 40 * time.Microsecond,
			80 * time.Microsecond, 160 * time.Microsecond, 320 * time.Microsecond, 640 * time.Microsecond, ms, ms}},
		{"start above cap", Policy{Start: 3 * time.Second, Cap: time.Second}, []time.Duration{3 * time.Second, 3 * time.Second}},
		{"no room for jitter", Policy{Start: 1, Cap: 1}, []time.Duration{1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.policy.New()
			for round := range 2 {
				for i, d := range tc.steps {
					got := b.Next()
					if low := d - time.Duration(float64(d)*Jitter); got < low || got > d {
						t.Fatalf("round %d, delay %d: %v; want within [%v, %v]", round, i, got, low, d)
					}
				}
				b.Reset()
			}
		})
	}
}

// TestJitterSpreads: the delays of one step are not all alike, and reach
// both halves of their range.
func TestJitterSpreads(t *testing.T) {
	d := time.Second
	var low, high bool
	for range 1000 {
		got := jitter(d)
		low = low || got < 3*d/4
		high = high || got >= 3*d/4
	}
	if !low || !high {
		t.Fatalf("1000 draws from [%v, %v]: below 3/4: %t, above: %t; want both", d/2, d, low, high)
	}
}

// TestStepAndDraw: Step follows Next's undrawn delays; Draw spans
// [d·(1−Jitter), d].
func TestStepAndDraw(t *testing.T) {
	ms := time.Millisecond
	p := Policy{Start: 10 * ms, Cap: 100 * ms}
	for n, want := range []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 100 * ms, 100 * ms} {
		if got := p.Step(n); got != want {
			t.Errorf("Step(%d) = %v; want %v", n, got, want)
		}
	}
	if got := p.Step(1 << 20); got != 100*ms {
		t.Errorf("Step(2^20) = %v; want the cap", got)
	}
	for _, tc := range []struct {
		u    float64
		want time.Duration
	}{{0, 50 * ms}, {0.5, 75 * ms}, {1, 100 * ms}} {
		if got := Draw(100*ms, tc.u); got != tc.want {
			t.Errorf("Draw(100ms, %v) = %v; want %v", tc.u, got, tc.want)
		}
	}
}

// TestSleep: Sleep waits its whole delay and reports true, or returns
// false as soon as ctx ends.
func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !Sleep(context.Background(), time.Second) || time.Since(start) != time.Second {
			t.Fatalf("Sleep(1s) returned false or after %v", time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start = time.Now()
		if Sleep(ctx, time.Second) || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("Sleep with a 100ms ctx returned true or after %v", time.Since(start))
		}
	})
}
