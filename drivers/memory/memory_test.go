package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	store := memory.New()
	drivertest.Run(t, drivertest.Harness{
		New: func(testing.TB) drivers.Driver { return store },
		TTL: 300 * time.Millisecond,
	})
}

func TestRevokeToken(t *testing.T) {
	ctx := context.Background()
	d := memory.New()
	var events []drivers.Event
	unsub, err := d.Subscribe(ctx, func(e drivers.Event) { events = append(events, e) })
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "holder", TTL: time.Minute}); err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	tests := []struct {
		name, key, token   string
		revoked, heldAfter bool
	}{
		{"another token", "k", "former", false, true},
		{"absent key", "other", "holder", false, true},
		{"the holder's token", "k", "holder", true, false},
		{"already revoked", "k", "holder", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events = nil
			if got := d.RevokeToken(tt.key, tt.token); got != tt.revoked {
				t.Errorf("RevokeToken = %v, want %v", got, tt.revoked)
			}
			if _, held, err := d.Inspect(ctx, "k"); err != nil || held != tt.heldAfter {
				t.Errorf("k held %v (%v), want %v", held, err, tt.heldAfter)
			}
			want := 0
			if tt.revoked {
				want = 1
			}
			if len(events) != want || (want == 1 && (events[0].Kind != drivers.Lost || events[0].Token != "holder")) {
				t.Errorf("events %+v, want %d loss of holder's lock", events, want)
			}
		})
	}
}
