package schedule_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/internal/testutil"
	"github.com/mutexfx/mutexfx/schedule"
)

func TestMain(m *testing.M) { testutil.Main(m, runChild) }

// runs records the runs of jobs: planned instant → instances that ran it.
type runs struct {
	mu       sync.Mutex
	by       map[time.Time][]string
	instants tally // distinct instants run
}

func newRuns() *runs { return &runs{by: map[time.Time][]string{}} }

// job returns a job function recording instance's runs.
func (r *runs) job(instance string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		p, _ := schedule.Planned(ctx)
		r.mu.Lock()
		first := len(r.by[p.UTC()]) == 0
		r.by[p.UTC()] = append(r.by[p.UTC()], instance)
		r.mu.Unlock()
		if first {
			r.instants.add()
		}
		return nil
	}
}

// ran returns a channel closed once runs of n distinct instants are
// recorded: the length of a scenario, as a signal.
func (r *runs) ran(n int) <-chan struct{} { return r.instants.reached(n) }

// tally is a count whose levels are signals (reached).
type tally struct {
	mu    sync.Mutex
	n     int
	waits []tallyWait
}

// tallyWait is a channel closed once the count reaches n.
type tallyWait struct {
	n  int
	ch chan struct{}
}

// add adds one to the count.
func (c *tally) add() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	c.waits = slices.DeleteFunc(c.waits, func(w tallyWait) bool {
		if c.n >= w.n {
			close(w.ch)
			return true
		}
		return false
	})
}

// reached returns a channel closed once the count reaches n.
func (c *tally) reached(n int) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if c.n >= n {
		close(ch)
	} else {
		c.waits = append(c.waits, tallyWait{n, ch})
	}
	return ch
}

// releases counts the releases of key in drv, told by its events: the
// end of a scenario whose holders release the job's lock, as a signal.
func releases(t *testing.T, drv *memory.Driver, key string) *tally {
	t.Helper()
	c := &tally{}
	cancel, err := drv.Subscribe(context.Background(), func(e drivers.Event) {
		if e.Kind == drivers.Released && e.Key == key {
			c.add()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return c
}

// await waits for ch to close, failing the test naming what after limit.
func await(t *testing.T, limit time.Duration, what string, ch <-chan struct{}) {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", limit, what)
	}
}

func (r *runs) snapshot() map[time.Time][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[time.Time][]string, len(r.by))
	for k, v := range r.by {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// checkExactlyOnce fails unless every instant of period has at most one
// run, and every instant in [from, to] exactly one.
func checkExactlyOnce(t *testing.T, by map[time.Time][]string, period time.Duration, from, to time.Time) {
	t.Helper()
	for p, who := range by {
		if len(who) > 1 {
			t.Errorf("instant %s ran %d times: %v", p.Format("15:04:05.000"), len(who), who)
		}
	}
	n := 0
	for p := from.Truncate(period).Add(period); !p.After(to); p = p.Add(period) {
		n++
		if len(by[p.UTC()]) == 0 {
			t.Errorf("instant %s did not run", p.Format("15:04:05.000"))
		}
	}
	if n < 3 {
		t.Fatalf("only %d instants observed: the test window is too short", n)
	}
	t.Logf("%d instants in the window, %d instants run in all", n, len(by))
}

// newMutex returns a Mutex on drv, closed at the test's end.
func newMutex(t *testing.T, drv drivers.Driver) *component.Mutex {
	t.Helper()
	m, err := component.New(component.Options{Driver: drv, TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// logs returns a logger recording its entries at debug level and above.
func logs() (*zap.Logger, *observer.ObservedLogs) {
	core, obs := observer.New(zapcore.DebugLevel)
	return zap.New(core), obs
}

// logsUntil is logs with a channel closed once the logger logged msg
// (recorded then).
func logsUntil(msg string) (*zap.Logger, *observer.ObservedLogs, <-chan struct{}) {
	core, obs := observer.New(zapcore.DebugLevel)
	logged := make(chan struct{})
	var once sync.Once
	return zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		if e.Message == msg {
			once.Do(func() { close(logged) })
		}
		return nil
	})), obs, logged
}

// stop stops s within 5 s.
func stop(t *testing.T, s *schedule.Scheduler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Error(err)
	}
}
