package redis

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/component"
)

// commandLog records the name of every command a client sends, those of
// the calls under test (their ctx carries callKey) apart from those the
// component and the pool send on their own (renewals, connection setup in
// the background).
type commandLog struct {
	mu         sync.Mutex
	call       []string
	background []string
}

// callKey marks the ctx of a call under test.
type callKey struct{}

func (c *commandLog) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (c *commandLog) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.add(ctx, cmd.Name())
		return next(ctx, cmd)
	}
}
func (c *commandLog) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.add(ctx, "pipeline")
		return next(ctx, cmds)
	}
}

func (c *commandLog) add(ctx context.Context, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ctx.Value(callKey{}) != nil {
		c.call = append(c.call, name)
	} else {
		c.background = append(c.background, name)
	}
}

// connSetup names the commands a fresh connection sends before its first
// command (the handshake, which starts with HELLO, and the driver's
// OnConnect check).
var connSetup = map[string]bool{"hello": true, "info": true, "client": true, "auth": true, "select": true}

// withoutSetup returns names without connection setup commands when a
// connection was set up among them (a HELLO was sent): they belong to the
// connection, not to the call or the renewal that took it first.
func withoutSetup(names []string) []string {
	if !slices.Contains(names, "hello") {
		return names
	}
	return slices.DeleteFunc(names, func(n string) bool { return connSetup[n] })
}

// take returns the commands of the calls under test since the last take.
// A connection the pool handed to the call fresh (its first, or a new one
// after one was dropped under load) is set up within the call, on its ctx:
// those setup commands are left out.
func (c *commandLog) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.call
	c.call = nil
	return withoutSetup(out)
}

// backgroundCalls returns the commands sent outside the calls under test,
// connection setup left out.
func (c *commandLog) backgroundCalls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return withoutSetup(slices.Clone(c.background))
}

// TestUncontendedRoundTrips: an uncontended Acquire (which may wait) and
// Release through the component cost the store one script each, the
// round trips of the driver alone: the component adds no call.
//
// Besides the calls, the component renews on its own once it has
// subscribed to the store's events, in the background: a lock whose
// acquisition started before then gets one renewal at once (see
// component/subscribe.go). The test cannot tell when the component has
// subscribed (the store shows the subscription before the component
// records it), so it tells the calls' commands by their ctx and allows
// that one renewal, and nothing else, in the background.
func TestUncontendedRoundTrips(t *testing.T) {
	ctx := context.WithValue(context.Background(), callKey{}, true)
	d := standalone(t, Options{})
	m, err := component.New(component.Options{Driver: d, Prefix: "fastpath:", Timeout: component.Forever})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	name := strconv.FormatInt(time.Now().UnixNano(), 10)
	cycle := func(try bool) {
		t.Helper()
		var l *component.Lock
		if try {
			l, err = m.TryAcquire(ctx, name)
		} else {
			l, err = m.Acquire(ctx, name)
		}
		if err != nil || l == nil {
			t.Fatalf("acquire: %v %v", l, err)
		}
		if ok, err := l.Release(ctx); !ok || err != nil {
			t.Fatalf("release: %v %v", ok, err)
		}
	}
	cycle(false) // the first: scripts loaded, connections made, subscription started
	waitFor(t, "subscription", func() bool { return numSub(t, d, d.channel()) == 1 })
	log := &commandLog{}
	d.Client().AddHook(log)
	for _, try := range []bool{false, true} {
		for range 10 {
			cycle(try)
			got := log.take()
			if len(got) != 2 || got[0] != "evalsha" || got[1] != "evalsha" {
				t.Fatalf("TryAcquire=%v: acquire+release sent %q, want two EVALSHA", try, got)
			}
		}
	}
	if bg := log.backgroundCalls(); len(bg) > 1 || len(bg) == 1 && bg[0] != "pipeline" {
		t.Fatalf("sent %q besides the calls, want at most the one renewal after subscribing", bg)
	}
}
