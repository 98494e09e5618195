package component

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// Tests of the safety rule — a lock's holder never believes it holds a lock
// the store may have given to someone else — at the edges of renewal,
// release, Close and handover. The drivers below wrap the memory store
// with gates the tests open.

// remote is the memory store made to look like a network store (not
// InProcess), with optional gates. A nil gate is open.
type remote struct {
	*memory.Driver
	acquired   chan struct{} // Acquire took the lock in the store...
	reply      chan struct{} // ...and answers when this closes (or ctx ends: with ctx's error)
	replyDelay time.Duration // Acquire acts at once and answers this much later
	renewing   chan struct{} // a Renew call started...
	renew      chan struct{} // ...and acts when this closes
	releasing  chan struct{} // a Release call started...
	release    chan struct{} // ...and acts when this closes
	keepOpen   bool          // Close leaves the store open, for the test to inspect
}

func (r *remote) Features() drivers.Features {
	f := r.Driver.Features()
	f.InProcess = false
	return f
}

func (r *remote) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	res, err := r.Driver.Acquire(context.WithoutCancel(ctx), req)
	if r.acquired != nil {
		r.acquired <- struct{}{}
		select {
		case <-r.reply:
		case <-ctx.Done():
			return drivers.AcquireResult{}, ctx.Err() // the reply is lost
		}
	}
	if r.replyDelay > 0 {
		time.Sleep(r.replyDelay) // the store answers late; it ignores ctx
	}
	return res, err
}

func (r *remote) Renew(ctx context.Context, leases []drivers.Lease) []drivers.RenewResult {
	if r.renewing != nil {
		r.renewing <- struct{}{}
		<-r.renew
	}
	return r.Driver.Renew(ctx, leases)
}

func (r *remote) Release(ctx context.Context, key, token string) (bool, error) {
	if r.releasing != nil {
		r.releasing <- struct{}{}
		<-r.release
	}
	return r.Driver.Release(ctx, key, token)
}

func (r *remote) Close(ctx context.Context) error {
	if r.keepOpen {
		return nil
	}
	return r.Driver.Close(ctx)
}

func newOn(t *testing.T, d drivers.Driver, ttl time.Duration) *Mutex {
	t.Helper()
	m, err := New(Options{Driver: d, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// TestExtendDuringRenewal: an Extend called while a renewal with the old
// ttl is in flight must reach the store after it, so that the store keeps
// the lock at least as long as the Mutex believes it holds it. (Before:
// the renewal could land last, the store keeping 300 ms, the Mutex
// tracking 10 s.)
func TestExtendDuringRenewal(t *testing.T) {
	ctx := context.Background()
	r := &remote{Driver: memory.New(), renewing: make(chan struct{}), renew: make(chan struct{})}
	m := newOn(t, r, 300*time.Millisecond)
	openRenew := sync.OnceFunc(func() { close(r.renew) })
	t.Cleanup(openRenew) // before the Mutex's Close (cleanups run last first)
	l, err := m.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	<-r.renewing // the first renewal, 100 ms later, is in flight
	// Extend waits for it: here until its own ctx ends, having sent nothing.
	ectx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	ok, err := l.Extend(ectx, 10*time.Second)
	cancel()
	if ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Extend during a renewal = %v, %v; want it to wait for the renewal", ok, err)
	}
	if info, _, _ := r.Inspect(ctx, l.Key()); info.TTL > time.Second {
		t.Fatalf("store ttl %v: Extend reached the store during the renewal", info.TTL)
	}
	openRenew()
	if ok, err := l.Extend(ctx, 10*time.Second); err != nil || !ok {
		t.Fatalf("Extend = %v, %v", ok, err)
	}
	info, held, err := r.Inspect(ctx, l.Key())
	if err != nil || !held {
		t.Fatalf("store: held %v, %v", held, err)
	}
	m.mu.Lock()
	tracked := time.Until(l.expiry)
	m.mu.Unlock()
	if tracked > info.TTL {
		t.Fatalf("the Mutex tracks the lock for %v, the store keeps it %v", tracked, info.TTL)
	}
	if info.TTL < 5*time.Second {
		t.Fatalf("store ttl %v: the renewal's 300 ms landed after Extend's 10 s", info.TTL)
	}
}

// TestAnswerAfterTTL: a lock whose acquisition was answered after its ttl
// may already have expired in the store: it is not handed out. In a
// synctest bubble: the store answers 150 ms late on the bubble's clock.
func TestAnswerAfterTTL(t *testing.T) {
	Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		r := &remote{Driver: memory.New(), replyDelay: 150 * time.Millisecond, keepOpen: true}
		m := newOn(t, r, 100*time.Millisecond)
		l, err := m.TryAcquire(ctx, "a")
		if l != nil || !errors.Is(err, ErrTimeout) {
			t.Fatalf("TryAcquire answered after the ttl = %v, %v; want ErrTimeout", l, err)
		}
	})
}

// TestContextEndsBeforeStoreRelease: Release and Close end the lock's
// context before they ask the store to release it, so that the holder
// stops before anyone else can get the lock, however slow the store.
func TestContextEndsBeforeStoreRelease(t *testing.T) {
	for _, via := range []string{"Release", "Close"} {
		t.Run(via, func(t *testing.T) {
			ctx := context.Background()
			r := &remote{Driver: memory.New(), releasing: make(chan struct{}), release: make(chan struct{})}
			m := newOn(t, r, time.Minute)
			l, err := m.Acquire(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			lctx := l.Context()
			done := make(chan struct{})
			go func() {
				defer close(done)
				if via == "Release" {
					_, _ = l.Release(ctx)
				} else {
					_ = m.Close(ctx)
				}
			}()
			<-r.releasing
			select {
			case <-lctx.Done():
			default:
				t.Error("the lock's context is live while the store releases it")
			}
			want := ErrReleased
			if via == "Close" {
				want = ErrClosed
			}
			if !errors.Is(context.Cause(lctx), want) {
				t.Errorf("cause %v; want %v", context.Cause(lctx), want)
			}
			close(r.release)
			<-done
		})
	}
}

// TestCloseWaitsForAttempts: Close cancels a store attempt in flight and
// waits for it, so that a lock the store granted (its reply lost) is
// released before the driver closes.
func TestCloseWaitsForAttempts(t *testing.T) {
	ctx := context.Background()
	r := &remote{Driver: memory.New(), acquired: make(chan struct{}), reply: make(chan struct{}), keepOpen: true}
	m := newOn(t, r, time.Minute)
	got := make(chan error, 1)
	go func() {
		_, err := m.Acquire(ctx, "a")
		got <- err
	}()
	<-r.acquired
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := m.Close(cctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Errorf("Acquire during Close = %v; want ErrClosed", err)
	}
	if info, held, _ := r.Inspect(ctx, "mutex:a"); held {
		t.Fatalf("after Close the store holds the lock for %v, for nobody", info.TTL)
	}
}

// TestReleaseAfterCtxEnded: a deferred Release whose request context has
// ended still releases the lock.
func TestReleaseAfterCtxEnded(t *testing.T) {
	r := &remote{Driver: memory.New()}
	m := newOn(t, r, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	l, err := m.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if ok, err := l.Release(ctx); err != nil || !ok {
		t.Fatalf("Release with an ended ctx = %v, %v; want true", ok, err)
	}
	if _, held, _ := r.Inspect(context.Background(), l.Key()); held {
		t.Fatal("the store still holds the lock")
	}
}

// shortening is the memory store as a network store without wake-ups,
// whose Extend applies the new ttl and then fails (the reply is lost), and
// whose renewals fail (the store is unreachable).
type shortening struct{ *memory.Driver }

func (s *shortening) Features() drivers.Features {
	f := s.Driver.Features()
	f.InProcess = false
	return f
}

func (s *shortening) Subscribe() {} // hides the memory store's Subscriber

func (s *shortening) Extend(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	_, _ = s.Driver.Extend(ctx, key, token, ttl)
	return false, context.DeadlineExceeded
}

func (s *shortening) Renew(context.Context, []drivers.Lease) []drivers.RenewResult {
	return []drivers.RenewResult{{Err: errors.New("unreachable")}}
}

// TestFailedExtendShortens: an Extend to a shorter ttl that fails may have
// been applied: the lock is lost by that earlier expiry (its renewals
// failing), before another holder can take it — not at its next renewal.
func TestFailedExtendShortens(t *testing.T) {
	Unpooled(t)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := &shortening{Driver: memory.New()}
		m1 := newOn(t, s, 3*time.Second)
		l, err := m1.Acquire(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		// once the scheduler sleeps until the first renewal (1 s)
		waitLocked(t, m1, "the scheduler planning the renewal", func() bool {
			return m1.started && time.Until(m1.nextWake) > 500*time.Millisecond
		})
		extended := time.Now()
		if _, err := l.Extend(ctx, 50*time.Millisecond); err == nil {
			t.Fatal("Extend: no error")
		}
		// the store frees the lock 50 ms after the Extend (the next
		// renewal was due at 1 s)...
		if info, held, _ := s.Inspect(ctx, l.Key()); !held || info.TTL != 50*time.Millisecond {
			t.Fatalf("store: held %v for %v; want the Extend's 50 ms applied", held, info.TTL)
		}
		// ...and the holder's context ends by then, before another holder
		// can take the lock
		<-l.Context().Done()
		if e := time.Since(extended); e > 50*time.Millisecond {
			t.Fatalf("the holder's context ended %v after the failed Extend; the store freed the lock at 50 ms", e)
		}
	})
}

// hangs whatever its ctx says, until unblock closes.
type hung struct {
	*memory.Driver
	entered, unblock chan struct{}
}

func (h *hung) Features() drivers.Features {
	f := h.Driver.Features()
	f.InProcess = false
	return f
}

func (h *hung) Acquire(ctx context.Context, req drivers.AcquireRequest) (drivers.AcquireResult, error) {
	if req.Key == "mutex:b" {
		close(h.entered)
		<-h.unblock
		return drivers.AcquireResult{}, context.Canceled
	}
	return h.Driver.Acquire(ctx, req)
}

func (h *hung) Close(context.Context) error { return nil } // the test inspects the store after Close

// TestCloseReleasesDespiteHungAttempt: an attempt that ignores its
// cancellation does not keep Close from releasing the held locks.
func TestCloseReleasesDespiteHungAttempt(t *testing.T) {
	ctx := context.Background()
	h := &hung{Driver: memory.New(), entered: make(chan struct{}), unblock: make(chan struct{})}
	m, err := New(Options{Driver: h, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = m.Acquire(ctx, "b")
	}()
	<-h.entered
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_ = m.Close(cctx)
	cancel()
	close(h.unblock)
	<-done
	if info, held, _ := h.Inspect(ctx, l.Key()); held {
		t.Fatalf("after Close the store holds %q for %v", l.Key(), info.TTL)
	}
}

// TestLostEventForAnotherToken: a store's loss event for the lock's key
// but another holder's token (an earlier holder's, reported late) leaves
// the lock held; one with its own token loses it.
func TestLostEventForAnotherToken(t *testing.T) {
	m := newOn(t, memory.New(), time.Minute)
	l, err := m.Acquire(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	m.onEvent(drivers.Event{Kind: drivers.Lost, Key: l.Key(), Token: "an earlier holder"})
	if !l.Held() {
		t.Fatalf("lost by another token's event: %v", l.Err())
	}
	m.onEvent(drivers.Event{Kind: drivers.Lost, Key: l.Key(), Token: l.Token()})
	if !errors.Is(l.Err(), ErrLost) {
		t.Fatalf("after its own token's event: %v; want ErrLost", l.Err())
	}
}

// waitLocked checks cond, called with m.mu held, once every goroutine of
// the test's synctest bubble is blocked: for the Mutex's internal states
// that have no signal to wait on.
func waitLocked(t *testing.T, m *Mutex, what string, cond func() bool) {
	t.Helper()
	synctest.Wait()
	m.mu.Lock()
	ok := cond()
	m.mu.Unlock()
	if !ok {
		t.Fatalf("not reached: %s", what)
	}
}

// pollLocked polls cond, called with m.mu held, until it holds
// (testutil.Poll), failing the test after 5 s: for the Mutex's internal
// states that have no signal to wait on.
func pollLocked(t *testing.T, m *Mutex, what string, cond func() bool) {
	t.Helper()
	testutil.Poll(t, 5*time.Second, what, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return cond()
	})
}
