package component

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

// gated is the memory store as a network store with a Handover (release,
// then acquire for the new token), whose Release, Handover and Extend wait
// at a gate, and whose Close records whether one of them was in flight and
// fails with closeErr.
type gated struct {
	*memory.Driver
	entered  chan struct{} // a Release, Handover or Extend reached the gate
	open     chan struct{} // closed to let them through
	inFlight atomic.Int32
	handed   atomic.Int32  // Handover calls
	closed   chan struct{} // closed by Close
	closeErr error

	mu          sync.Mutex
	closedUnder int // Release/Handover calls in flight when Close came
}

func newGated() *gated {
	return &gated{Driver: memory.New(), entered: make(chan struct{}, 8), open: make(chan struct{}), closed: make(chan struct{})}
}

func (g *gated) Features() drivers.Features {
	f := g.Driver.Features()
	f.InProcess = false
	return f
}

func (g *gated) Subscribe() {} // hides the memory store's Subscriber

func (g *gated) gate() func() {
	g.inFlight.Add(1)
	g.entered <- struct{}{}
	<-g.open
	return func() { g.inFlight.Add(-1) }
}

func (g *gated) Release(ctx context.Context, key, token string) (bool, error) {
	defer g.gate()()
	return g.Driver.Release(ctx, key, token)
}

func (g *gated) Handover(ctx context.Context, key, token string, next drivers.AcquireRequest) (bool, drivers.AcquireResult, error) {
	g.handed.Add(1)
	defer g.gate()()
	ok, err := g.Driver.Release(ctx, key, token)
	if err != nil || !ok {
		return ok, drivers.AcquireResult{}, err
	}
	res, err := g.Driver.Acquire(ctx, next)
	return true, res, err
}

func (g *gated) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	defer g.gate()()
	return g.Driver.Extend(ctx, key, token, ttl)
}

func (g *gated) Close(context.Context) error {
	g.mu.Lock()
	g.closedUnder = int(g.inFlight.Load())
	g.mu.Unlock()
	close(g.closed)
	return g.closeErr
}

// TestCloseWaitsForReleases: Close waits for a Release, a handover or an
// Extend in flight before it closes the driver under it.
func TestCloseWaitsForReleases(t *testing.T) {
	for _, call := range []string{"Release", "Handover", "Extend"} {
		t.Run(call, func(t *testing.T) {
			ctx := context.Background()
			g := newGated()
			m, err := New(Options{Driver: g, TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			l, err := m.Acquire(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			defer wg.Wait()
			openGate := sync.OnceFunc(func() { close(g.open) })
			defer openGate() // first, when the test fails
			if call == "Handover" {
				wg.Go(func() {
					if _, err := m.Acquire(ctx, "a", WithTimeout(Forever)); !errors.Is(err, ErrClosed) {
						t.Errorf("waiter during Close: %v; want ErrClosed", err)
					}
				})
				parked(t, m, "a")
			}
			wg.Go(func() {
				var err error
				if call == "Extend" {
					_, err = l.Extend(ctx, time.Minute)
				} else {
					_, err = l.Release(ctx)
				}
				if err != nil {
					t.Errorf("%s: %v", call, err)
				}
			})
			<-g.entered // the call is in flight
			closeUnder(t, m, g, openGate)
			if (call == "Handover") != (g.handed.Load() > 0) {
				t.Fatalf("%d handovers", g.handed.Load())
			}
		})
	}
}

// closeUnder closes m while a call is held at g's gate: it lets the call
// through once Close waits for it (that state has no signal: it is polled)
// or once Close closed the driver under it, which fails the test.
func closeUnder(t *testing.T, m *Mutex, g *gated, openGate func()) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- m.Close(context.Background()) }()
	pollLocked(t, m, "Close to wait for the call or close the driver under it", func() bool {
		select {
		case <-g.closed:
			return true
		default:
			return m.closed && m.settled != nil
		}
	})
	openGate()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if g.closedUnder != 0 {
		t.Fatalf("the driver was closed with %d calls in flight", g.closedUnder)
	}
}

// TestSecondClose: a Close called while the first is under way waits for
// it and returns its result, or its own ctx's cause when that ends first.
func TestSecondClose(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"WaitsForTheFirst", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, boom},
		{"CtxEnds", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			g := newGated()
			g.closeErr = boom
			m, err := New(Options{Driver: g, TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Acquire(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			defer wg.Wait()
			openGate := sync.OnceFunc(func() { close(g.open) })
			defer openGate() // first, when the test fails
			first := make(chan error, 1)
			wg.Go(func() { first <- m.Close(ctx) })
			<-g.entered // the first Close is releasing the lock
			cctx, cancel := tc.ctx()
			defer cancel()
			second := make(chan error, 1)
			wg.Go(func() { second <- m.Close(cctx) })
			if tc.want == context.Canceled {
				// it returns while the first is still under way
				if err := <-second; !errors.Is(err, context.Canceled) {
					t.Errorf("second Close with an ended ctx = %v; want context.Canceled", err)
				}
			}
			openGate()
			if err := <-first; !errors.Is(err, boom) {
				t.Fatalf("first Close = %v; want %v", err, boom)
			}
			if tc.want == boom {
				if err := <-second; !errors.Is(err, boom) {
					t.Fatalf("second Close = %v; want the first's result, %v", err, boom)
				}
			}
			if err := m.Close(ctx); !errors.Is(err, boom) {
				t.Fatalf("Close after Close = %v; want the first's result", err)
			}
		})
	}
}

// panicClose is a store whose Close panics.
type panicClose struct{ drivers.Driver }

func (panicClose) Close(context.Context) error { panic("close panicked") }

// TestClosePanicked: when the first Close panics (here the driver's Close),
// a later Close does not wait for it forever: it reports the panic.
func TestClosePanicked(t *testing.T) {
	m, err := New(Options{Driver: panicClose{memory.New()}, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the first Close did not panic")
			}
		}()
		_ = m.Close(context.Background())
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.Close(ctx); !errors.Is(err, errClosePanicked) {
		t.Fatalf("second Close = %v; want errClosePanicked", err)
	}
}

// inProcGated is gated as an in-process store whose Acquire calls, from
// the from-th on, also wait at the gate (an in-process call is short,
// never cut: Close waits for it).
type inProcGated struct {
	*gated
	from  int32
	calls *atomic.Int32
}

func (g inProcGated) Features() drivers.Features { return g.Driver.Features() }

func (g inProcGated) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	if g.calls.Add(1) >= g.from {
		defer g.gate()()
	}
	return g.Driver.Acquire(ctx, req)
}

// TestCloseWaitsForInProcessAcquire: Close waits for an in-process store's
// Acquire in flight, made by TryAcquire, by Acquire at once, or by Acquire
// after a failed attempt, and a lock it got is released before Close
// closes the driver.
func TestCloseWaitsForInProcessAcquire(t *testing.T) {
	for _, tc := range []struct {
		name  string
		taken bool  // the name is held elsewhere: attempts fail
		from  int32 // the first gated Acquire call
		call  func(m *Mutex) error
	}{
		{"TryAcquire", false, 1, func(m *Mutex) error { _, err := m.TryAcquire(context.Background(), "a"); return err }},
		{"Acquire", false, 1, func(m *Mutex) error { _, err := m.Acquire(context.Background(), "a"); return err }},
		{"AcquireAgain", true, 2, func(m *Mutex) error {
			_, err := m.Acquire(context.Background(), "a", WithTimeout(Forever))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			g := inProcGated{newGated(), tc.from, new(atomic.Int32)}
			m, err := New(Options{Driver: g, TTL: time.Minute, RetryDelay: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if !m.feat.InProcess {
				t.Fatal("the store is not in process")
			}
			if tc.taken {
				if res, err := g.Driver.Acquire(ctx, drivers.AcquireRequest{Key: DefaultPrefix + "a", Token: "other", TTL: time.Minute}); err != nil || !res.Acquired {
					t.Fatalf("other holder: %+v, %v", res, err)
				}
			}
			var wg sync.WaitGroup
			defer wg.Wait()
			openGate := sync.OnceFunc(func() { close(g.open) })
			defer openGate() // first, when the test fails
			wg.Go(func() {
				if err := tc.call(m); !errors.Is(err, ErrClosed) {
					t.Errorf("%s during Close: %v; want ErrClosed", tc.name, err)
				}
			})
			<-g.entered // the Acquire is in flight
			closeUnder(t, m, g.gated, openGate)
			if info, held, err := g.Driver.Inspect(ctx, DefaultPrefix+"a"); err != nil || held != tc.taken {
				t.Fatalf("after Close the store holds %+v (%v, %v): the attempt's lock was not released first", info, held, err)
			}
		})
	}
}
