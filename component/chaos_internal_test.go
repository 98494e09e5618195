package component

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

// chaos is the memory store as a network store whose calls answer late,
// lose their replies, or fail and land later (within the contract: up to
// attemptGrace after the call returned).
type chaos struct {
	*memory.Driver
	mu  sync.Mutex
	rnd *mrand.Rand
	wg  sync.WaitGroup
}

func (c *chaos) Features() drivers.Features {
	f := c.Driver.Features()
	f.InProcess = false
	return f
}

func (c *chaos) roll() (kind int, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rnd.IntN(10), time.Duration(c.rnd.IntN(400)) * time.Millisecond
}

var errChaos = errors.New("chaos: connection reset")

// call runs apply under the chaos rules.
func (c *chaos) call(ctx context.Context, apply func()) error {
	kind, d := c.roll()
	switch {
	case kind < 5: // applied at once, answered after d or ctx
		apply()
		select {
		case <-time.After(d / 4):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	case kind < 7: // applied after d/4, answered then, or ctx first (applied anyway later)
		t := time.NewTimer(d / 4)
		select {
		case <-t.C:
			apply()
			return nil
		case <-ctx.Done():
			c.wg.Go(func() { time.Sleep(time.Duration(min(int64(d/4), int64(attemptGrace/2)))); apply() })
			return ctx.Err()
		}
	case kind < 9: // fails now, lands within the grace
		c.wg.Go(func() { time.Sleep(min(d, attemptGrace-time.Millisecond)); apply() })
		return errChaos
	default: // fails, never applied
		return errChaos
	}
}

func (c *chaos) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	var mu sync.Mutex
	var res drivers.AcquireResult
	err := c.call(ctx, func() {
		r, _ := c.Driver.Acquire(context.Background(), req)
		mu.Lock()
		res = r
		mu.Unlock()
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		return drivers.AcquireResult{}, err
	}
	return res, nil
}

func (c *chaos) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	var mu sync.Mutex
	ok := false
	err := c.call(ctx, func() {
		r, _ := c.Driver.Extend(context.Background(), key, token, ttl)
		mu.Lock()
		ok = r
		mu.Unlock()
	})
	mu.Lock()
	defer mu.Unlock()
	return ok && err == nil, err
}

func (c *chaos) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	var mu sync.Mutex
	var out []drivers.RenewResult
	err := c.call(ctx, func() {
		r := c.Driver.Renew(context.Background(), leases)
		mu.Lock()
		out = r
		mu.Unlock()
	})
	if err != nil {
		return drivers.RenewFailed(len(leases), err)
	}
	mu.Lock()
	defer mu.Unlock()
	return out
}

func (c *chaos) Release(ctx context.Context, key, token string) (bool, error) {
	return c.Driver.Release(ctx, key, token)
}

type chaosHand struct{ *chaos }

func (c chaosHand) Handover(ctx context.Context, key, token string, next drivers.AcquireRequest) (bool, drivers.AcquireResult, error) {
	var mu sync.Mutex
	var rel bool
	var res drivers.AcquireResult
	err := c.call(ctx, func() {
		ok, _ := c.Driver.Release(context.Background(), key, token)
		var r drivers.AcquireResult
		if ok {
			r, _ = c.Driver.Acquire(context.Background(), next)
		}
		mu.Lock()
		rel, res = ok, r
		mu.Unlock()
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		return false, drivers.AcquireResult{}, err
	}
	return rel, res, nil
}

// chaosCounts counts a run's acquisitions and checks.
type chaosCounts struct{ acquired, checks, held atomic.Int64 }

// checkHeld fails the test if l reads held while the store holds its key
// for another token or for nobody: read before and after the store, so
// that a lock that ends meanwhile is not counted.
func checkHeld(t *testing.T, st *memory.Driver, l *Lock, n *chaosCounts) {
	n.checks.Add(1)
	if !l.Held() {
		return
	}
	n.held.Add(1)
	info, held, _ := st.Inspect(context.Background(), l.key)
	if !l.Held() {
		return
	}
	if !held || info.Token != l.token {
		t.Errorf("lock %s reads held (expiry in %v, ttl %v) while the store has held=%v token ok=%v",
			l.key, time.Until(l.expiry), l.ttl, held, info.Token == l.token)
	}
}

// TestChaosSafety: three Mutexes (two handing locks over), two workers
// each, take one name for 60 s of the bubble's clock with ttls of 0.5 to 3
// s and random Extends, on a store whose calls answer late, lose their
// replies, fail, or fail and land up to attemptGrace later. A lock never
// reads held while the store holds it for another token or for nobody.
func TestChaosSafety(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			var n chaosCounts
			chaosRun(t, seed, &n)
			if n.acquired.Load() == 0 || n.held.Load() == 0 {
				t.Fatalf("%d acquisitions, %d checks of a held lock: the run tested nothing", n.acquired.Load(), n.held.Load())
			}
		})
	}
}

func chaosRun(t *testing.T, seed uint64, n *chaosCounts) {
	Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		st := memory.New()
		c := &chaos{Driver: st, rnd: mrand.New(mrand.NewPCG(seed, 7))}
		var wg sync.WaitGroup
		var ms []*Mutex
		for i := range 3 {
			var d drivers.Driver = c
			if i%2 == 0 {
				d = chaosHand{c}
			}
			m, err := New(Options{Driver: d, TTL: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
			for w := range 2 {
				r := mrand.New(mrand.NewPCG(seed, uint64(10*i+w)))
				wg.Go(func() {
					end := time.Now().Add(60 * time.Second)
					for time.Now().Before(end) {
						ttl := []time.Duration{500 * time.Millisecond, time.Second, 3 * time.Second}[r.IntN(3)]
						l, err := m.Acquire(context.Background(), "k", WithTTL(ttl), WithTimeout(5*time.Second))
						if err != nil {
							continue
						}
						n.acquired.Add(1)
						hold := time.Duration(r.IntN(4000)) * time.Millisecond
						stop := time.Now().Add(hold)
						for time.Now().Before(stop) {
							checkHeld(t, st, l, n)
							if r.IntN(20) == 0 {
								ectx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(500))*time.Millisecond)
								_, _ = l.Extend(ectx, []time.Duration{200 * time.Millisecond, 700 * time.Millisecond, 4 * time.Second}[r.IntN(3)])
								cancel()
								checkHeld(t, st, l, n)
							}
							time.Sleep(time.Duration(1+r.IntN(30)) * time.Millisecond)
						}
						checkHeld(t, st, l, n)
						_, _ = l.Release(context.Background())
					}
				})
			}
		}
		wg.Wait()
		for _, m := range ms {
			_ = m.Close(context.Background())
		}
		c.wg.Wait()
	})
}
