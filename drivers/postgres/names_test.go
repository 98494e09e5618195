package postgres

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// TestNamesAreData takes, wakes on and releases locks whose names would
// break unparameterised SQL or a naive NOTIFY, in both modes. A 10 KB name
// is too long for a NOTIFY payload, and names with NUL or invalid UTF-8 are
// not text: they are released without a wake-up.
// Advisory drivers run with MaxSessions 1, the configuration whose releases
// notify; in table mode the second driver waits (Wait > 0), which queues it
// in the row, so that the release notifies.
func TestNamesAreData(t *testing.T) {
	names := []struct {
		name   string
		notify bool
	}{
		{`quote ' and '' and "double"`, true},
		{`back\slash \x00-not-nul $1 %s %% _ *`, true},
		{"unicode ☃ 東京 ё \u200b emoji 🔒", true},
		{"semicolon; DROP TABLE mutexfx_locks; --", true},
		{strings.Repeat("n", 7999-len("names:")), true},
		{strings.Repeat("é", 5000), false}, // 10 KB
		// not text: no NOTIFY payload can carry them
		{"nul \x00 byte", false},
		{"invalid utf-8 \xff\xfe", false},
	}
	for _, mode := range []string{ModeAdvisory, ModeTable} {
		t.Run(mode, func(t *testing.T) {
			ctx := ctxT(t)
			// advisory releases notify only without server-side waits
			// (MaxSessions 1); table releases always do
			a, b := shared(t, Options{Mode: mode, MaxSessions: 1}), shared(t, Options{Mode: mode, MaxSessions: 1})
			var mu sync.Mutex
			released := map[string]bool{}
			cancel, err := b.Subscribe(ctx, func(ev drivers.Event) {
				if ev.Kind == drivers.Released {
					mu.Lock()
					released[ev.Key] = true
					mu.Unlock()
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer cancel()
			// the subscription connects in the background: wait until a
			// release is heard
			probe := "names:probe:" + t.Name()
			within(t, 5*time.Second, "subscription ready", func() bool {
				if res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: probe, Token: "p", TTL: time.Minute}); err != nil || !res.Acquired {
					return false
				}
				waitFor(ctx, b, probe)
				_, _ = a.Release(ctx, probe, "p")
				// (heard, if the subscription listens, by a later poll)
				mu.Lock()
				defer mu.Unlock()
				return released[probe]
			})
			for _, n := range names {
				key := "names:" + n.name
				res, err := a.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "tok", TTL: time.Minute})
				if err != nil || !res.Acquired {
					t.Fatalf("Acquire %.30q = %+v, %v", key, res, err)
				}
				if res, err := b.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "other", TTL: time.Minute, Wait: time.Millisecond}); err != nil || res.Acquired {
					t.Fatalf("second Acquire %.30q = %+v, %v; want held", key, res, err)
				}
				if ok, err := a.Release(ctx, key, "tok"); err != nil || !ok {
					t.Fatalf("Release %.30q = %v, %v", key, ok, err)
				}
				if n.notify {
					within(t, 2*time.Second, "wake-up", func() bool {
						mu.Lock()
						defer mu.Unlock()
						return released[key]
					})
				}
			}
		})
	}
}

// waitFor makes d wait for key for a millisecond: in table mode that queues
// d in the row, so that the release notifies.
func waitFor(ctx context.Context, d Driver, key string) {
	_, _ = d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "probe-waiter", TTL: time.Minute, Wait: time.Millisecond})
}
