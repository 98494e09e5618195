package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/backoff"
)

// Subscribe calls fn with a Released event for every release notified on the
// channel (by any driver on the database) or, in table mode, on this
// driver's own channel (a release with drivers queued for the row notifies
// only the first of them, there), and a Lost event for every advisory lock
// whose connection broke. The driver's LISTEN connection (one
// for all subscriptions) is opened in the background and reopened after a
// failure (after backoff.Default's delays: 50 ms doubling to 1 s,
// jittered; back to 50 ms after a connection that lasted a minute), so Subscribe never fails for an
// unreachable server or a pooler refusing LISTEN: waiters then poll. Keys
// longer than 7999 bytes are released without a notification (PostgreSQL's
// payload limit). In advisory mode releases notify only with MaxSessions 1
// (otherwise waiters wait in the server).
func (b *base) Subscribe(ctx context.Context, fn func(drivers.Event)) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	remove := b.subs.Add(fn)
	b.startListenerLocked()
	b.mu.Unlock()
	return func() { remove() }, nil
}

// startListenerLocked starts, with b.mu held, the driver's one LISTEN
// goroutine, shared by every subscription and by the table driver's
// waiting acquisitions, unless it runs or the driver is closed. It runs
// until Close.
func (b *base) startListenerLocked() {
	if b.closed || b.lisDone != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.lisStop, b.lisDone = cancel, make(chan struct{})
	go b.listen(ctx, b.lisDone)
}

// publish calls the subscribers with evs.
func (b *base) publish(evs ...drivers.Event) { b.subs.Publish(evs...) }

// listen keeps a LISTEN connection until ctx ends.
func (b *base) listen(ctx context.Context, done chan struct{}) {
	defer close(done)
	retry := backoff.Default.New()
	for {
		start := time.Now()
		b.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > time.Minute {
			retry.Reset()
		}
		if !backoff.Sleep(ctx, retry.Next()) {
			return
		}
	}
}

// listenOnce connects, listens and delivers notifications (to heard, then
// to the subscribers) until the connection fails or ctx ends.
func (b *base) listenOnce(ctx context.Context) {
	conn, err := pgx.ConnectConfig(ctx, b.connCfg)
	if err != nil {
		return
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, sessionSetup); err != nil {
		return
	}
	for _, ch := range b.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			return
		}
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return
		}
		if n.Payload == "" {
			continue
		}
		if b.heard != nil {
			b.heard(n.Payload)
		}
		b.publish(drivers.Event{Kind: drivers.Released, Key: n.Payload})
	}
}
