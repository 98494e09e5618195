//go:build unix

package etcd

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// faultTTL is the lock ttl of the fault tests (a lease of 3 s).
const faultTTL = 2 * time.Second

// resource is what the contending holders of one lock protect: it counts
// holders that overlap without the earlier one told of its loss, fences
// that do not grow, and writes made with a fence older than one already
// written (a holder writes only while its lock's context is live).
type resource struct {
	mu         sync.Mutex
	inside     map[*component.Lock]bool
	lastFence  uint64
	written    uint64
	acquired   int
	overlaps   int
	backwards  int
	staleWrite int
	lost       int
}

func newResource() *resource { return &resource{inside: map[*component.Lock]bool{}} }

// enter records an acquisition. An earlier holder counts as told of its
// loss when its Err says so: Err checks the tracked expiry when called,
// where the lock's context sees it only when its timer fires, which a
// loaded machine may run late.
func (r *resource) enter(l *component.Lock) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for o := range r.inside {
		if o.Err() == nil {
			r.overlaps++
		}
	}
	if l.Fence() <= r.lastFence {
		r.backwards++
	}
	r.lastFence = l.Fence()
	r.acquired++
	r.inside[l] = true
}

// leave writes with l's fence when l is still held, and records the exit.
func (r *resource) leave(l *component.Lock) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.inside, l)
	if l.Err() != nil {
		r.lost++
		return
	}
	if l.Fence() < r.written {
		r.staleWrite++
	}
	r.written = l.Fence()
}

// check fails the test on any overlap, backward fence or stale write, and
// when fewer than min acquisitions were made.
func (r *resource) check(t *testing.T, min int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Logf("%d acquisitions, %d lost while held", r.acquired, r.lost)
	if r.overlaps != 0 || r.backwards != 0 || r.staleWrite != 0 {
		t.Errorf("%d unsignalled overlaps, %d fences not above the last, %d stale-fence writes; want 0",
			r.overlaps, r.backwards, r.staleWrite)
	}
	if r.acquired < min {
		t.Errorf("%d acquisitions; want at least %d", r.acquired, min)
	}
}

// acquisitions returns the number of acquisitions so far.
func (r *resource) acquisitions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acquired
}

// contend runs one worker per endpoint list, each a component on its own
// driver, taking the same lock in a loop (holding it hold each time) until
// ctx ends. Errors (a fault under way) are retried.
func contend(ctx context.Context, t *testing.T, r *resource, endpoints [][]string, hold time.Duration) *sync.WaitGroup {
	t.Helper()
	name := "fault/" + rand.Text()[:8]
	var wg sync.WaitGroup
	for _, eps := range endpoints {
		d := open(t, Options{Endpoints: eps, DialTimeout: time.Second})
		m := drivertest.Mutex(t, component.Options{Driver: d, TTL: faultTTL, RetryDelay: 20 * time.Millisecond})
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := m.Acquire(ctx, name, component.WithTimeout(5*time.Second))
				if err != nil {
					continue
				}
				r.enter(l)
				select {
				case <-time.After(hold):
				case <-l.Done():
				case <-ctx.Done():
				}
				r.leave(l)
				rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, _ = l.Release(rctx)
				cancel()
			}
		})
	}
	return &wg
}

// leader returns the index of c's leader, asking each member.
func leader(t *testing.T, c *testutil.EtcdCluster) int {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	leader := -1
	testutil.Poll(t, 10*time.Second, "a leader", func() bool {
		for i, m := range c.Members {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			st, err := cli.Status(ctx, m.ClientAddr)
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

// waitAcquisitions waits until r has n more acquisitions than now, or
// fails after d.
func waitAcquisitions(t *testing.T, r *resource, n int, d time.Duration) {
	t.Helper()
	want := r.acquisitions() + n
	testutil.Poll(t, d, fmt.Sprintf("%d more acquisitions", n), func() bool { return r.acquisitions() >= want })
}
