package redis

import (
	"context"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/component"
)

// commandLog records the name of every command a client sends, and
// whether it dialled a new connection.
type commandLog struct {
	mu    sync.Mutex
	names []string
	dials int
}

func (c *commandLog) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.mu.Lock()
		c.dials++
		c.mu.Unlock()
		return next(ctx, network, addr)
	}
}
func (c *commandLog) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.mu.Lock()
		c.names = append(c.names, cmd.Name())
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (c *commandLog) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.mu.Lock()
		c.names = append(c.names, "pipeline")
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

// connSetup names the commands a fresh connection sends before its first
// call (the handshake and the driver's OnConnect check).
var connSetup = map[string]bool{"hello": true, "info": true, "client": true, "auth": true, "select": true}

// take returns the commands sent since the last take. A connection the pool
// dialled meanwhile (one dropped under load) sends its setup commands; those
// are left out, since they belong to the connection and not to the call.
func (c *commandLog) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.names
	if c.dials > 0 {
		out = slices.DeleteFunc(out, func(n string) bool { return connSetup[n] })
	}
	c.names, c.dials = nil, 0
	return out
}

// TestUncontendedRoundTrips: an uncontended Acquire (which may wait) and
// Release through the component cost the store one script each, the
// round trips of the driver alone: the component adds no call.
func TestUncontendedRoundTrips(t *testing.T) {
	ctx := context.Background()
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
}
