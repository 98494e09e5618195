package redis

import (
	"context"
	"errors"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

// subscription is the driver's one Pub/Sub connection on its own release
// channel (Channel + ":" + its waiter id), shared by every Subscribe call.
// Its one goroutine reads the connection itself, checks its health and
// has go-redis reconnect and resubscribe it after a network error (see
// run: go-redis's Channel would add two goroutines and miss a connection
// gone silent).
type subscription struct {
	ps     *goredis.PubSub
	check  subCheck
	cancel context.CancelFunc // ends the goroutine, cuts its SUBSCRIBE or dial short
	done   chan struct{}      // closed when the goroutine ends

	listeners kit.Listeners
}

// subCheck is the Pub/Sub connection's health check, go-redis Channel's
// own: a connection silent for idle is pinged; one that answers nothing
// within pong of the ping is dropped and replaced.
type subCheck struct{ idle, pong time.Duration }

// defaultSubCheck is go-redis Channel's health check (3 s, 5 s).
var defaultSubCheck = subCheck{idle: 3 * time.Second, pong: 5 * time.Second}

// subRetryDelay is the pause between failed attempts to reconnect the
// Pub/Sub (go-redis Channel's), from the second in a row.
const subRetryDelay = 100 * time.Millisecond

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

// startSubscription opens the Pub/Sub and its goroutine. Called with d.mu
// held.
func (d *Driver) startSubscription() *subscription {
	ctx, cancel := context.WithCancel(d.ctx)
	sub := &subscription{
		cancel: cancel,
		check:  d.subCheck,
		// No channel yet: this connects nothing. The goroutine subscribes.
		ps:   d.client.Subscribe(d.ctx),
		done: make(chan struct{}),
	}
	go sub.run(ctx, d.channel(), d.message, d.subscribed)
	return sub
}

// channel is the driver's own release channel.
func (d *Driver) channel() string { return d.set.channel + ":" + d.id }

// run subscribes and delivers messages until ctx ends or the Pub/Sub is
// closed. Each time the server confirms the subscription, the first and
// after every reconnection, it calls subscribed: a message published
// before that was not heard.
//
// It reads as go-redis's Channel does, without the goroutines Channel
// forwards messages and pings through. A read has a context deadline
// check.idle + check.pong after the last thing read, and a timer pings the
// connection check.idle after it: a live connection answers the ping (a
// pong is read), and a read that reaches its deadline makes go-redis drop
// the connection (the next read reconnects and resubscribes), so a
// connection gone silent is replaced, which Channel's check would never
// do. No read ends with a timeout that keeps the connection (go-redis's
// ReceiveTimeout): one that ended inside a message would leave its tail to
// be read as a reply of its own, any bytes of a key or token taken as
// RESP.
func (s *subscription) run(ctx context.Context, channel string, handle func(payload string) (string, bool), subscribed func()) {
	defer close(s.done)
	if !s.subscribe(ctx, channel) {
		return
	}
	p := s.startPinger(ctx)
	defer p.stop()
	for failed := 0; ; {
		rctx, cancel := context.WithTimeout(ctx, s.check.idle+s.check.pong)
		msg, err := s.ps.ReceiveTimeout(rctx, 0)
		cancel()
		p.reset()
		switch {
		case ctx.Err() != nil || errors.Is(err, goredis.ErrClosed):
			return
		case err == nil:
			failed = 0
			s.deliver(msg, handle, subscribed)
		default:
			// go-redis dropped the connection: the next read reconnects
			if failed++; failed > 1 && !pause(ctx, subRetryDelay) {
				return
			}
		}
	}
}

// subscribe sends the first SUBSCRIBE until one is written, and reports
// false when ctx ended first. go-redis resubscribes the channel on every
// reconnection, but only once a Subscribe call has returned: a failed
// first SUBSCRIBE reconnects at once, to a connection with no
// subscription, which nothing would ever replace.
func (s *subscription) subscribe(ctx context.Context, channel string) bool {
	for attempt := 0; ; attempt++ {
		sctx, cancel := context.WithTimeout(ctx, DefaultDialTimeout)
		err := s.ps.Subscribe(sctx, channel)
		cancel()
		switch {
		case err == nil:
			return true
		case ctx.Err() != nil || errors.Is(err, goredis.ErrClosed):
			return false
		case attempt > 0 && !pause(ctx, subRetryDelay):
			return false
		}
	}
}

// pinger pings the Pub/Sub connection check.idle after the last thing
// read, from a timer's goroutine, while run's read waits.
type pinger struct {
	idle time.Duration
	t    *time.Timer

	mu      sync.Mutex // held by a ping under way
	stopped bool
}

func (s *subscription) startPinger(ctx context.Context) *pinger {
	p := &pinger{idle: s.check.idle}
	p.t = time.AfterFunc(p.idle, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.stopped {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, s.check.pong)
		defer cancel()
		_ = s.ps.Ping(pctx) // one that cannot be written reconnects
	})
	return p
}

// reset sets the next ping check.idle from now.
func (p *pinger) reset() { p.t.Reset(p.idle) }

// stop stops the timer and waits for a ping under way: none starts after.
func (p *pinger) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.t.Stop()
}

// deliver handles a release message and a subscription confirmation;
// pongs are only signs of life.
func (s *subscription) deliver(msg any, handle func(payload string) (string, bool), subscribed func()) {
	switch m := msg.(type) {
	case *goredis.Message:
		if key, ok := handle(m.Payload); ok {
			s.listeners.Publish(drivers.Event{Kind: drivers.Released, Key: key})
		}
	case *goredis.Subscription:
		if m.Kind == "subscribe" {
			subscribed()
		}
	}
}

// pause waits d, or until ctx ends (false).
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// stop ends the goroutine, closes the Pub/Sub and waits for both, or for
// ctx. A SUBSCRIBE stuck on a silent server holds the Pub/Sub until the
// command timeout; the goroutine then ends on its own.
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
