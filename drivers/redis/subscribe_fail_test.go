package redis

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// failSubscribeConn fails the first write that carries a SUBSCRIBE, as a
// connection reset while the first SUBSCRIBE is sent.
type failSubscribeConn struct {
	net.Conn
	failed *atomic.Bool
}

func (c failSubscribeConn) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(b), []byte("subscribe")) && c.failed.CompareAndSwap(false, true) {
		return 0, errors.New("injected: connection reset while writing SUBSCRIBE")
	}
	return c.Conn.Write(b)
}

// TestFirstSubscribeWriteFails: go-redis's PubSub.Subscribe remembers the
// channel (to resubscribe after a reconnection) only after its SUBSCRIBE
// returns, and a failed SUBSCRIBE write reconnects at once: to a
// connection with no subscription, which answers every ping, so nothing
// would replace it, no release would hand the driver a lock (PUBSUB
// NUMSUB 0) and every waiter would poll for the driver's whole life. The
// driver subscribes again.
func TestFirstSubscribeWriteFails(t *testing.T) {
	var failed atomic.Bool
	c := goredis.NewClient(&goredis.Options{
		Addr:                  testutil.RedisAddr(),
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return failSubscribeConn{Conn: conn, failed: &failed}, nil
		},
	})
	t.Cleanup(func() { _ = c.Close() })
	d, err := NewWithClient(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	d.subCheck = subCheck{idle: 100 * time.Millisecond, pong: 200 * time.Millisecond}
	h := standalone(t, Options{})
	d.listen()
	waitFor(t, "a subscriber after a failed first SUBSCRIBE write", func() bool { return numSub(t, h, d.channel()) == 1 })
	if !failed.Load() {
		t.Fatal("no SUBSCRIBE write failed")
	}
}
