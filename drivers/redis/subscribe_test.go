package redis

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/drivertest"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// A waiter in these tests polls every slowPoll, so that only its
// subscription's catch-up can give it the lock within soon.
const (
	slowPoll = 10 * time.Second
	soon     = 2 * time.Second
)

// lateSubscriber is a holder h on Redis and a waiter w that polls every
// slowPoll, on a proxy p, with its pool's connection open: the next
// connection w opens is its Pub/Sub's.
type lateSubscriber struct {
	h, w *Driver
	p    *testutil.Proxy
	key  string
}

func newLateSubscriber(t *testing.T) *lateSubscriber {
	t.Helper()
	p := testutil.NewProxy(t, testutil.RedisAddr())
	s := &lateSubscriber{h: standalone(t, Options{}), w: standalone(t, Options{Addrs: []string{p.Addr}}), p: p}
	s.w.poll = slowPoll
	if err := s.w.Client().Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	s.key = "redistest:" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)
	t.Cleanup(func() {
		s.h.Client().Del(context.Background(), lockKey(s.key), fenceKey(s.key), queueKey(s.key), liveKey(s.key))
	})
	return s
}

func (s *lateSubscriber) req(tok string, wait time.Duration) drivers.AcquireRequest {
	return drivers.AcquireRequest{Key: s.key, Token: tok, TTL: 30 * time.Second, Wait: wait}
}

// hold makes the holder h take the lock and the waiter w wait for it:
// queued, and in its poll.
func (s *lateSubscriber) hold(t *testing.T) <-chan drivertest.Outcome {
	t.Helper()
	if res, err := s.h.Acquire(t.Context(), s.req("h", 0)); err != nil || !res.Acquired {
		t.Fatalf("h: %+v, %v", res, err)
	}
	got := drivertest.AcquireAsync(t.Context(), s.w, s.req("w", time.Minute))
	queued(t, s.h, s.key, 1) // (not on w's link: no second connection of its pool)
	return got
}

// subscribe subscribes w, through a hold it then releases, and returns
// that hold (its Cut cuts the Pub/Sub connection).
func (s *lateSubscriber) subscribe(t *testing.T) *testutil.Hold {
	t.Helper()
	hold := s.p.HoldNext()
	s.w.listen()
	arrived(t, hold)
	hold.Release()
	waitFor(t, "waiter subscribed", func() bool { return numSub(t, s.h, s.w.channel()) == 1 })
	return hold
}

// release has h release the lock, and checks whom it went to ("": left
// free, the waiter being told to retry).
func (s *lateSubscriber) release(t *testing.T, want string) {
	t.Helper()
	if ok, err := s.h.Release(t.Context(), s.key, "h"); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	if v := s.h.Client().Get(t.Context(), lockKey(s.key)).Val(); v != want {
		t.Fatalf("lock held by %q after the release; want %q", v, want)
	}
}

// acquiredSoon checks that the waiter got the lock within soon of since.
func (s *lateSubscriber) acquiredSoon(t *testing.T, got <-chan drivertest.Outcome, since time.Time) {
	t.Helper()
	select {
	case r := <-got:
		fence, _ := s.h.Client().Get(t.Context(), fenceKey(s.key)).Uint64()
		if r.Err != nil || !r.Res.Acquired || r.Res.Fence != fence {
			t.Fatalf("waiter: %+v, %v; want the lock with fence %d", r.Res, r.Err, fence)
		}
		t.Logf("waiter acquired %v after its subscription landed", r.At.Sub(since))
	case <-time.After(soon):
		t.Fatalf("waiter still waiting %v after its subscription landed (it polls every %v)", soon, slowPoll)
	}
}

// releaseUnheard has h release while w's SUBSCRIBE waits in hold (the
// release sees no subscriber), lets it through, and checks that the
// waiter has the lock soon after.
func (s *lateSubscriber) releaseUnheard(t *testing.T, got <-chan drivertest.Outcome, hold *testutil.Hold) {
	t.Helper()
	s.release(t, "")
	landed := time.Now()
	hold.Release()
	s.acquiredSoon(t, got, landed)
}

// arrived waits for hold's connection.
func arrived(t *testing.T, hold *testutil.Hold) {
	t.Helper()
	select {
	case <-hold.Arrived():
	case <-time.After(5 * time.Second):
		t.Fatal("no connection reached the proxy's hold")
	}
}

// TestReleaseBeforeFirstSubscription: a waiting call's first attempt runs
// while its driver's first SUBSCRIBE is still on its way; a release in
// between sees no subscriber and its wake-up is lost. Once the server
// confirms the subscription the call looks again at once: it does not
// wait for its poll.
func TestReleaseBeforeFirstSubscription(t *testing.T) {
	s := newLateSubscriber(t)
	hold := s.p.HoldNext()
	got := s.hold(t) // subscribes, through the hold
	arrived(t, hold)
	if n := numSub(t, s.h, s.w.channel()); n != 0 {
		t.Fatalf("%d subscribers while the SUBSCRIBE is held", n)
	}
	s.releaseUnheard(t, got, hold)
}

// TestReleaseWhileResubscribing: the Pub/Sub connection breaks while a
// call waits; a release before go-redis's new SUBSCRIBE lands sees no
// subscriber. Once the server confirms the new subscription the call
// looks again at once.
func TestReleaseWhileResubscribing(t *testing.T) {
	s := newLateSubscriber(t)
	first := s.subscribe(t)
	got := s.hold(t)
	again := s.p.HoldNext()
	first.Cut()
	arrived(t, again)
	waitFor(t, "old subscription gone", func() bool { return numSub(t, s.h, s.w.channel()) == 0 })
	s.releaseUnheard(t, got, again)
}

// TestGrantLostWithItsConnection: a release hands the lock to the waiting
// call (its driver subscribed), but the message dies with the Pub/Sub
// connection. Once go-redis has subscribed again the call looks again at
// once, and its acquire script returns the lock handed to its token.
func TestGrantLostWithItsConnection(t *testing.T) {
	s := newLateSubscriber(t)
	sub := s.subscribe(t)
	got := s.hold(t)
	s.p.Stall()
	s.release(t, "w")
	waitFor(t, "hand-off message held in the stalled proxy", func() bool { return s.p.Blocked() > 0 })
	sub.Cut()
	cut := time.Now()
	s.p.Resume()
	s.acquiredSoon(t, got, cut)
	if n := numSub(t, s.h, s.w.channel()); n != 1 {
		t.Fatalf("%d subscribers after the reconnection; want 1", n)
	}
}

// TestConfirmationBeforeWatch: a subscription confirmed while a call's
// first attempt is under way (it does not watch yet) wakes the call as
// it watches; one confirmed before the attempt started does not.
func TestConfirmationBeforeWatch(t *testing.T) {
	d := standalone(t, Options{})
	req := drivers.AcquireRequest{Key: "redistest:" + t.Name(), Token: "w", TTL: time.Second, Wait: time.Second}
	start := time.Now()
	d.subscribed()
	w := d.watch(req.Key, req.Token, start)
	select {
	case <-w.wake:
	default:
		t.Fatal("a call that started before the confirmation was not woken")
	}
	d.unwatch(req, w, true)

	d.watchers.mu.Lock()
	after := d.watchers.since.Add(time.Nanosecond)
	d.watchers.mu.Unlock()
	w = d.watch(req.Key, req.Token, after)
	defer d.unwatch(req, w, true)
	select {
	case <-w.wake:
		t.Fatal("a call that started after the confirmation was woken")
	default:
	}
}

// TestSilentSubscriptionReplaced: the Pub/Sub connection goes silent (the
// network holds its bytes; the socket stays open). Pinged after
// subCheck.idle and unanswered for subCheck.pong, it is dropped and
// replaced, and the new subscription hears the next hand-off.
func TestSilentSubscriptionReplaced(t *testing.T) {
	s := newLateSubscriber(t)
	s.w.subCheck = subCheck{idle: 100 * time.Millisecond, pong: 200 * time.Millisecond}
	s.subscribe(t)
	again := s.p.HoldNext()
	s.p.Stall()
	arrived(t, again)
	s.p.Resume()
	again.Release()
	waitFor(t, "one subscription, the new one", func() bool { return numSub(t, s.h, s.w.channel()) == 1 })
	got := s.hold(t)
	s.release(t, "w")
	s.acquiredSoon(t, got, time.Now())
}

// TestSplitMessageNotMissed: a hand-off message arrives in two parts,
// the second after the subscription's idle ping. The read waits on for the
// rest (none ends with a timeout that keeps the connection), so the
// message is whole and the waiter has the lock as soon as it arrives. Were
// the read to time out and keep the connection, go-redis would read the
// tail as a reply of its own: split before the payload, a bulk string read
// as a pong (the message lost); split two bytes before the end of a key
// ending in "*0", an empty array, which panics in go-redis's
// PubSub.newMessage and ends the process.
func TestSplitMessageNotMissed(t *testing.T) {
	tests := []struct {
		name   string
		suffix string                       // of the key
		split  func(ch, payload string) int // bytes of the message sent first
	}{
		{"before the payload", "", func(ch, _ string) int {
			return len(fmt.Sprintf(">3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n", len(ch), ch))
		}},
		{"inside the key", "*0", func(ch, payload string) int {
			return len(fmt.Sprintf(">3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$%d\r\n%s", len(ch), ch, len(payload), payload)) - len("*0")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newLateSubscriber(t)
			s.key += tt.suffix
			s.w.subCheck = subCheck{idle: 200 * time.Millisecond, pong: 5 * time.Second}
			s.subscribe(t)
			got := s.hold(t)
			f, err := s.h.Client().Get(t.Context(), fenceKey(s.key)).Uint64()
			if err != nil {
				t.Fatal(err)
			}
			ch := s.w.channel()
			// the grant the release publishes (see queueLua's pass); the
			// message's header is ">3" in RESP3 ("*3" in RESP2: as long)
			s.p.SplitNext(tt.split(ch, fmt.Sprintf("g%d,1,w%s", f+1, s.key)))
			s.release(t, "w")
			// the message's tail and the idle ping, held
			waitFor(t, "the idle ping", func() bool { return s.p.Blocked() == 2 })
			resumed := time.Now()
			s.p.Resume()
			s.acquiredSoon(t, got, resumed)
		})
	}
}
