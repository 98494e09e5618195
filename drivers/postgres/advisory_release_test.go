package postgres

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestReleaseWhileSessionBusy: a release whose ctx ends while another
// statement on the holding session (a renewal on a stalled link) holds the
// session still unlocks: advisory locks never expire. After a brief stall
// it unlocks once the session is free; after one past StallTimeout it gives
// the session up, and the server frees the lock when the link heals.
func TestReleaseWhileSessionBusy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stall time.Duration // how long the link stays stalled after the release starts
		freed bool          // the release unlocked the lock itself
	}{
		{"brief stall", 700 * time.Millisecond, true},
		{"stall past StallTimeout", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			p := testutil.NewProxy(t, "127.0.0.1:5432")
			d, err := New(Options{URL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable", p.Port()),
				StallTimeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeDriver(t, d) })
			key, tok := "busy:"+rand.Text(), rand.Text()
			if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 5 * time.Second}); err != nil || !res.Acquired {
				t.Fatalf("Acquire = %+v, %v", res, err)
			}
			p.Stall()
			extended := make(chan struct{})
			go func() {
				defer close(extended)
				_, _ = d.Extend(ctx, key, tok, 5*time.Second) // holds the session until the link heals
			}()
			within(t, 2*time.Second, "Extend sent into the stall", func() bool { return p.Blocked() > 0 })
			if tc.stall > 0 {
				resume := time.AfterFunc(tc.stall, p.Resume)
				defer resume.Stop()
			}
			rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			ok, err := d.Release(rctx, key, tok)
			cancel()
			t.Logf("Release = %v, %v", ok, err)
			if tc.freed != (err == nil && ok) {
				t.Fatalf("Release = %v, %v; want released: %v", ok, err, tc.freed)
			}
			p.Resume()
			<-extended
			other := on(t, testutil.PostgresDSN(), Options{})
			take := func() bool {
				res, err := other.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "other", TTL: time.Second})
				return err == nil && res.Acquired
			}
			if tc.freed {
				if !take() {
					t.Fatal("another driver cannot take the lock right after its release")
				}
				return
			}
			// the given-up connection closes through the healed link and the
			// server frees the lock
			within(t, 5*time.Second, "lock freed", take)
		})
	}
}
