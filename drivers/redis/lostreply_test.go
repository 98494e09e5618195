package redis

import (
	"context"
	"crypto/rand"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// lostSetup is a holder h (direct) holding key with token "h", and a
// waiter driver w through a loser, subscribed; scripts loaded, keys
// deleted at the end.
type lostSetup struct {
	ch, key, token string
	p              *loser
	h, w           *Driver
}

func newLostSetup(t *testing.T) lostSetup {
	t.Helper()
	s := lostSetup{
		ch:    "redistest:" + t.Name(),
		key:   "redistest:" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10),
		token: "w-" + rand.Text(),
		p:     newLoser(t, testutil.RedisAddr()),
	}
	s.h = standalone(t, Options{Channel: s.ch})
	s.w = standalone(t, Options{Addrs: []string{s.p.addr}, Channel: s.ch})
	t.Cleanup(func() {
		s.h.Client().Del(context.Background(), lockKey(s.key), fenceKey(s.key), queueKey(s.key), liveKey(s.key))
	})
	loadScripts(t, s.h.Client())
	if res, err := s.h.Acquire(t.Context(), drivers.AcquireRequest{Key: s.key, Token: "h", TTL: 5 * time.Second}); err != nil || !res.Acquired {
		t.Fatalf("h: %+v, %v", res, err)
	}
	cancel, err := s.w.Subscribe(t.Context(), func(drivers.Event) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	waitFor(t, "w subscribed", func() bool { return numSub(t, s.h, s.w.channel()) == 1 })
	return s
}

// waitLost makes w's waiting Acquire whose first attempt runs on the
// server but loses its reply, then the given faults on the next requests
// of its token (its cleanups).
func (s lostSetup) waitLost(t *testing.T, cleanups ...fault) {
	t.Helper()
	s.p.lose(s.token, append([]fault{loseReply}, cleanups...)...)
	res, err := s.w.Acquire(t.Context(), drivers.AcquireRequest{Key: s.key, Token: s.token, TTL: 5 * time.Second, Wait: 2 * time.Second})
	if err == nil {
		t.Fatalf("w: %+v, no error; want the lost reply's", res)
	}
}

// registered returns the token registered for d's waiter on key's queue.
func registered(t *testing.T, s lostSetup) string {
	t.Helper()
	v, err := s.h.Client().HGet(t.Context(), liveKey(s.key), "t:"+s.w.id).Result()
	if err != nil && err != goredis.Nil {
		t.Fatal(err)
	}
	return v
}

// TestLostReplyCleanedUp: a waiting Acquire whose attempt ran on the
// server (queuing its token) but whose reply was lost returns the error,
// and its cleanup still unregisters the token though the error marked the
// server down (trying again once the server answers when its first try is
// lost too): a release then leaves the lock free, not held by the gone
// call's token for its ttl, and another driver gets it.
func TestLostReplyCleanedUp(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cleanups []fault
	}{
		{"cleanup", nil},
		{"cleanup retried", []fault{loseRequest}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newLostSetup(t)
			ctx := t.Context()
			s.waitLost(t, tc.cleanups...)
			s.w.wg.Wait() // the cleanup and the probe
			if !s.p.spent() {
				t.Fatal("the cleanup was not tried")
			}
			if tok := registered(t, s); tok != "" {
				t.Fatalf("token %q still registered after the cleanup", tok)
			}
			if ok, err := s.h.Release(ctx, s.key, "h"); err != nil || !ok {
				t.Fatalf("release: %v, %v", ok, err)
			}
			if info, held, err := s.h.Inspect(ctx, s.key); err != nil || (held && info.Token == s.token) {
				t.Fatalf("after the release: %+v, %v, %v; handed to the gone call", info, held, err)
			}
			o := standalone(t, Options{Channel: s.ch})
			start := time.Now()
			res, err := o.Acquire(ctx, drivers.AcquireRequest{Key: s.key, Token: "o", TTL: 5 * time.Second, Wait: 2 * time.Second})
			if err != nil || !res.Acquired || time.Since(start) > WaiterLiveness+2*WaitPollInterval {
				t.Fatalf("o: %+v, %v after %v; want acquired within the gone waiter's liveness", res, err, time.Since(start))
			}
		})
	}
}

// TestGrantToAGoneCallReleased: when the cleanup of such a call fails too
// (its requests are lost), a release hands the lock to its still
// registered token; the call's driver, hearing the hand-off for a call
// that returned without the lock, releases it at once and passes it on to
// the next waiter.
func TestGrantToAGoneCallReleased(t *testing.T) {
	s := newLostSetup(t)
	ctx := t.Context()
	msgs := listen(t, s.h.Client(), s.ch)
	s.waitLost(t, loseRequest, loseRequest)
	n := standalone(t, Options{Channel: s.ch})
	got := make(chan drivers.AcquireResult, 1)
	go func() {
		res, err := n.Acquire(ctx, drivers.AcquireRequest{Key: s.key, Token: "n", TTL: 5 * time.Second, Wait: 3 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	queued(t, s.h, s.key, 2)
	waitFor(t, "n subscribed", func() bool { return numSub(t, s.h, n.channel()) == 1 })
	waitFor(t, "w's cleanups lost", s.p.spent)
	if tok := registered(t, s); tok != s.token {
		t.Fatalf("token %q registered; want the gone call's %q (its cleanups were lost)", tok, s.token)
	}
	released := time.Now()
	if ok, err := s.h.Release(ctx, s.key, "h"); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	first := msgs.next(t, s.h.Client(), s.ch)
	if len(first) == 0 || first[0].Channel != s.w.channel() || !strings.HasPrefix(first[0].Payload, "g") {
		t.Fatalf("messages %v; want a hand-off to w first (w queued less than %v ago)", first, WaiterLiveness)
	}
	res := <-got
	if !res.Acquired || time.Since(released) > time.Second {
		t.Fatalf("n: %+v after %v; want the lock passed on at once", res, time.Since(released))
	}
	if info, _, err := s.h.Inspect(ctx, s.key); err != nil || info.Token != "n" || info.Fence != res.Fence {
		t.Fatalf("holder %+v, %v; want n with fence %d", info, err, res.Fence)
	}
}

// TestLateGrantToAHolderKept: a hand-off message that comes after its call
// returned with the lock (it saw the lock handed over on a poll, or when
// its time was up) is not taken for a gone call's: the lock stays held.
func TestLateGrantToAHolderKept(t *testing.T) {
	ch := "redistest:" + t.Name()
	d := standalone(t, Options{Channel: ch})
	ctx := t.Context()
	key := "redistest:" + t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)
	defer d.Client().Del(context.Background(), lockKey(key), fenceKey(key))
	res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: "w", TTL: 5 * time.Second, Wait: time.Second})
	if err != nil || !res.Acquired {
		t.Fatalf("w: %+v, %v", res, err)
	}
	// The message a release that handed the lock to "w" published.
	if _, ok := d.message("g" + strconv.FormatUint(res.Fence, 10) + ",1,w" + key); !ok {
		t.Fatal("message not parsed")
	}
	d.wg.Wait()
	if info, held, err := d.Inspect(ctx, key); err != nil || !held || info.Token != "w" {
		t.Fatalf("after a late hand-off message: %+v, %v, %v; want still held by w", info, held, err)
	}
}

// TestRetriedAcquireGetsItsOwnLock: go-redis retries an acquisition whose
// reply was lost (MaxRetries, or a client of the application with
// go-redis's default 3 retries); the first run took the lock, so the
// retry finds it held by the same token and returns it as acquired.
func TestRetriedAcquireGetsItsOwnLock(t *testing.T) {
	for _, tc := range retrying {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			p, d, direct, key := retried(t, tc.new)
			token := "r-" + rand.Text()
			p.lose(token, loseReply)
			res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: token, TTL: 5 * time.Second})
			if !p.spent() {
				t.Fatal("no reply lost")
			}
			info, held, ierr := direct.Inspect(ctx, key)
			if ierr != nil || !held || info.Token != token {
				t.Fatalf("holder %+v, %v, %v; want the first run's token", info, held, ierr)
			}
			if err != nil || !res.Acquired || res.Fence != info.Fence {
				t.Fatalf("retried Acquire = %+v, %v; want acquired with fence %d", res, err, info.Fence)
			}
		})
	}
}
