package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/drivers"
)

// subscription is one Subscribe call: its LISTEN goroutine and callback.
type subscription struct {
	fn     func(drivers.Event)
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *subscription) stop() {
	s.cancel()
	<-s.done
}

// Subscribe calls fn with a Released event for every release notified on the
// channel (by any driver on the database) and a Lost event for every
// advisory lock whose connection broke. Its LISTEN connection is opened in
// the background and reopened after a failure (with a backoff up to 5s), so
// Subscribe never fails for an unreachable server or a pooler refusing
// LISTEN: waiters then poll. Keys longer than 7999 bytes are released
// without a notification (PostgreSQL's payload limit).
func (d *Driver) Subscribe(ctx context.Context, fn func(drivers.Event)) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	sub := &subscription{fn: fn, cancel: cancel, done: make(chan struct{})}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		cancel()
		return nil, ErrClosed
	}
	id := d.nextSub
	d.nextSub++
	d.subs[id] = sub
	d.mu.Unlock()
	go d.listen(lctx, sub)
	return func() {
		d.mu.Lock()
		delete(d.subs, id)
		d.mu.Unlock()
		sub.stop()
	}, nil
}

// subscribers returns the callbacks; the caller holds d.mu.
func (d *Driver) subscribers() []func(drivers.Event) {
	fns := make([]func(drivers.Event), 0, len(d.subs))
	for _, s := range d.subs {
		fns = append(fns, s.fn)
	}
	return fns
}

// listen keeps a LISTEN connection until ctx ends.
func (d *Driver) listen(ctx context.Context, sub *subscription) {
	defer close(sub.done)
	backoff := 100 * time.Millisecond
	for {
		start := time.Now()
		d.listenOnce(ctx, sub.fn)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			backoff = 100 * time.Millisecond
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// listenOnce connects, listens and delivers notifications until the
// connection fails or ctx ends.
func (d *Driver) listenOnce(ctx context.Context, fn func(drivers.Event)) {
	conn, err := pgx.ConnectConfig(ctx, d.connCfg)
	if err != nil {
		return
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "LISTEN "+d.names.channel); err != nil {
		return
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return
		}
		if n.Payload != "" {
			d.wake(n.Payload)
			fn(drivers.Event{Kind: drivers.Released, Key: n.Payload})
		}
	}
}
