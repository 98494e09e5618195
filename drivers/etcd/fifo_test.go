//go:build unix

package etcd

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestFIFOAcrossDrivers: components on separate drivers (as separate
// processes are) get a lock in the order they asked for it, and a holder
// that releases and asks again at once queues behind them (same-again 0).
// Each waiter's place survives its component's successive attempts (each
// blocks at most a third of the ttl, here 333 ms, and the test waits for
// two more of each waiter's attempts to end before the release).
func TestFIFOAcrossDrivers(t *testing.T) {
	c := singleMember(t)
	ctx := t.Context()
	holder := mutex(t, open(t, Options{Endpoints: c.Endpoints()}))
	probe := open(t, Options{Endpoints: c.Endpoints()})
	const name = "fifo"
	key := component.DefaultPrefix + name
	first, err := holder.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	var ds []*attempts
	for i := range 4 {
		d := &attempts{Driver: open(t, Options{Endpoints: c.Endpoints()})}
		ds = append(ds, d)
		m := drivertest.Mutex(t, component.Options{Driver: d, TTL: time.Second})
		wg.Go(func() {
			l, err := m.Acquire(ctx, name, component.WithTimeout(30*time.Second))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, fmt.Sprint(i))
			mu.Unlock()
			l.Release(ctx)
		})
		testutil.Poll(t, 10*time.Second, "the waiter queued", func() bool { n, _ := probe.queueLen(ctx, key); return n == int64(i+2) })
	}
	// Two more attempts of each waiter end (at most 333 ms each) before the
	// release: their places must hold.
	var want []int32
	for _, d := range ds {
		want = append(want, d.ended.Load()+2)
	}
	testutil.Poll(t, 10*time.Second, "two more attempts of each waiter", func() bool {
		for i, d := range ds {
			if d.ended.Load() < want[i] {
				return false
			}
		}
		return true
	})
	if n, err := probe.queueLen(ctx, key); n != 5 || err != nil {
		t.Fatalf("queue of %d keys, %v, after the waiters' attempts; want 5", n, err)
	}
	first.Release(ctx)
	again, err := holder.Acquire(ctx, name, component.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	order = append(order, "again")
	mu.Unlock()
	again.Release(ctx)
	wg.Wait()
	if want := []string{"0", "1", "2", "3", "again"}; !slices.Equal(order, want) {
		t.Fatalf("served in order %v; want %v", order, want)
	}
}

// attempts is a driver counting its Acquire calls that ended: a waiting
// component's attempts.
type attempts struct {
	*Driver
	ended atomic.Int32
}

func (a *attempts) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	defer a.ended.Add(1)
	return a.Driver.Acquire(ctx, req)
}
