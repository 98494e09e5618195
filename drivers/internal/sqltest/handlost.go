package sqltest

import (
	"context"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// LostHandover is a store's side of HandoverAnswerLost.
type LostHandover struct {
	// Driver is a table-mode driver with one connection, through Proxy;
	// the test builds its component, of ttl and Prefix, on it. Name is a
	// lock name no other run uses.
	Driver drivers.Driver
	Prefix string
	Name   string
	Proxy  *testutil.Proxy
	TTL    time.Duration
	// LockRow locks the row of key, in a transaction of another session
	// that changes nothing, and returns its commit and whether the
	// driver's statement waits for that row lock now. Called with the
	// lock held and a waiter parked.
	LockRow func(ctx context.Context, key string) (commit func() error, waiting func() bool)
	// Token reads the row's token.
	Token func(ctx context.Context, key string) (string, error)
}

// subscribed is what a Mutex logs once its store's wake-ups are in place.
const subscribed = "mutex store wake-ups subscribed"

// HandoverAnswerLost checks a Release that hands the lock to a waiter of
// the same Mutex, whose handover statement commits but whose answer the
// link loses (reset after the commit): the Release fails, the lock taken
// for the waiter's new token is released in the background, and the
// waiter, woken, acquires as usual. It must get the lock at once, not a
// ttl later, when the orphaned lock expires.
func HandoverAnswerLost(ctx context.Context, t *testing.T, s LostHandover) {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	m, err := component.New(component.Options{Driver: s.Driver, TTL: s.TTL, Prefix: s.Prefix, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Close(cctx)
	})
	// A Mutex subscribes to its store's wake-ups at its first acquisition,
	// in the background, and renews at once the locks it holds when that
	// lands (a loss may have gone unseen). Such a renewal of the lock
	// below could be the statement the row lock stops on the one
	// connection, instead of the handover: subscribe first.
	name := s.Name
	warm, err := m.TryAcquire(ctx, name+":warm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, 5*time.Second, "the Mutex's subscription", func() bool { return logs.FilterMessage(subscribed).Len() > 0 })

	first, err := m.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		l   *component.Lock
		err error
		at  time.Time
	}
	waited := make(chan answer, 1)
	go func() {
		l, err := m.Acquire(ctx, name, component.WithTimeout(time.Minute))
		waited <- answer{l, err, time.Now()}
	}()
	testutil.Poll(t, 5*time.Second, "a waiter", func() bool { return m.Waiters(name) == 1 })

	commit, waiting := s.LockRow(ctx, first.Key())
	released := make(chan error, 1)
	go func() {
		_, err := first.Release(ctx)
		released <- err
	}()
	testutil.Poll(t, 5*time.Second, "the handover waiting for the row lock", waiting)
	s.Proxy.Stall()
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, 5*time.Second, "the handover's answer held back", func() bool { return s.Proxy.Blocked() > 0 })
	if tok, err := s.Token(ctx, first.Key()); err != nil || tok == first.Token() || tok == "" {
		t.Fatalf("row token = %q, %v; want handed over by the statement", tok, err)
	}
	s.Proxy.Reset() // the answer is lost
	lost := time.Now()
	s.Proxy.Resume()

	// the Release fails as one whose answer is lost does: it cannot tell
	t.Logf("holder's Release: %v", <-released)
	got := <-waited
	if got.err != nil {
		t.Fatalf("waiter's Acquire: %v", got.err)
	}
	took := got.at.Sub(lost)
	t.Logf("waiter got the lock %v after the reset", took)
	if took >= s.TTL/4 {
		t.Errorf("waiter got the lock %v after the reset; want at once, not about the ttl (%v)", took, s.TTL)
	}
	if ok, err := got.l.Release(ctx); err != nil || !ok {
		t.Errorf("waiter's Release = %v, %v", ok, err)
	}
	if tok, err := s.Token(ctx, first.Key()); err != nil || tok != "" {
		t.Errorf("row token after the waiter's Release = %q, %v; want free", tok, err)
	}
}
