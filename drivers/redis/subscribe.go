package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

// subscription is the driver's one Pub/Sub connection on its own release
// channel (Channel + ":" + its waiter id), shared by every Subscribe call. go-redis reconnects and
// resubscribes it after a network error.
type subscription struct {
	ps     *goredis.PubSub
	cancel context.CancelFunc // cuts the initial SUBSCRIBE short
	done   chan struct{}      // closed when the delivery goroutine ends

	listeners kit.Listeners
}

// Subscribe calls fn with a Released event whenever a lock is released
// while this driver's waiter is the first live one queued for it (the key
// is the component's key): releases are published only to the process
// whose turn it is, so that the others sleep on. Uncontended releases
// publish nothing. The driver holds one Pub/Sub connection however many
// subscribers it has; it
// is opened by the first Subscribe, in the background (Subscribe does not
// wait for the network), and closed with the last cancel or Close. Events
// are hints: messages published while the connection is down, or before
// the server has the subscription, are lost. The driver's own waiting
// Acquire calls do not miss them: each time the server confirms the
// subscription (the first time, and after every reconnection) they all
// look again at once (see subscribed).
func (d *Driver) Subscribe(ctx context.Context, fn func(drivers.Event)) (func(), error) {
	if err := kit.LockOpen(ctx, &d.mu, &d.closed); err != nil {
		return nil, err
	}
	if d.sub == nil {
		d.sub = d.startSubscription()
	}
	sub := d.sub
	remove := sub.listeners.Add(fn)
	d.mu.Unlock()

	return func() {
		d.mu.Lock()
		last := remove() && d.sub == sub
		if last {
			d.sub = nil
		}
		d.mu.Unlock()
		if last {
			ctx, cancel := context.WithTimeout(context.Background(), DefaultCommandTimeout)
			defer cancel()
			_ = sub.stop(ctx)
		}
	}, nil
}

// startSubscription opens the Pub/Sub and its delivery goroutine. Called
// with d.mu held.
func (d *Driver) startSubscription() *subscription {
	ctx, cancel := context.WithCancel(d.ctx)
	sub := &subscription{
		cancel: cancel,
		// No channel yet: this connects nothing. The goroutine subscribes.
		ps:   d.client.Subscribe(d.ctx),
		done: make(chan struct{}),
	}
	go sub.run(ctx, d.channel(), d.message, d.subscribed)
	return sub
}

// channel is the driver's own release channel.
func (d *Driver) channel() string { return d.set.channel + ":" + d.id }

// run subscribes (go-redis remembers the channel and resubscribes after a
// reconnection even if this first attempt fails) and delivers messages
// until the Pub/Sub is closed. Each time the server confirms the
// subscription, the first and after every reconnection, it calls
// subscribed: a message published before that was not heard.
func (s *subscription) run(ctx context.Context, channel string, handle func(payload string) (string, bool), subscribed func()) {
	defer close(s.done)
	sctx, cancel := context.WithTimeout(ctx, DefaultDialTimeout)
	_ = s.ps.Subscribe(sctx, channel)
	cancel()
	ch := s.ps.ChannelWithSubscriptions(goredis.WithChannelSize(1024), goredis.WithChannelHealthCheckInterval(3*time.Second))
	for m := range ch {
		switch m := m.(type) {
		case *goredis.Message:
			key, ok := handle(m.Payload)
			if !ok {
				continue
			}
			s.listeners.Publish(drivers.Event{Kind: drivers.Released, Key: key})
		case *goredis.Subscription:
			if m.Kind == "subscribe" {
				subscribed()
			}
		}
	}
}

// stop closes the Pub/Sub and waits for the delivery goroutine, or for ctx.
// A SUBSCRIBE stuck on a silent server holds the Pub/Sub until the command
// timeout; the goroutine then ends on its own.
func (s *subscription) stop(ctx context.Context) error {
	s.cancel()
	closed := make(chan struct{})
	go func() {
		_ = s.ps.Close()
		close(closed)
	}()
	select {
	case <-s.done:
		<-closed
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
