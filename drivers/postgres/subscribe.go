package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mutexfx/mutexfx/drivers"
)

// listener is the driver's one LISTEN goroutine, shared by every
// subscription and by the waiting acquisitions of table mode. It runs from
// its first use until Close.
type listener struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (l *listener) stop() {
	l.cancel()
	<-l.done
}

// Subscribe calls fn with a Released event for every release notified on the
// channel (by any driver on the database) or, in table mode, on this
// driver's own channel (a release with drivers queued for the row notifies
// only the first of them, there), and a Lost event for every advisory lock
// whose connection broke. The driver's LISTEN connection (one
// for all subscriptions) is opened in the background and reopened after a
// failure (with a backoff up to 5s), so Subscribe never fails for an
// unreachable server or a pooler refusing LISTEN: waiters then poll. Keys
// longer than 7999 bytes are released without a notification (PostgreSQL's
// payload limit). In advisory mode releases notify only with MaxSessions 1
// (otherwise waiters wait in the server).
func (d *Driver) Subscribe(ctx context.Context, fn func(drivers.Event)) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, ErrClosed
	}
	id := d.nextSub
	d.nextSub++
	d.subs[id] = fn
	d.startListenerLocked()
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		delete(d.subs, id)
		d.mu.Unlock()
	}, nil
}

// startListener starts the LISTEN goroutine unless it runs or the driver
// is closed.
func (d *Driver) startListener() {
	d.mu.Lock()
	d.startListenerLocked()
	d.mu.Unlock()
}

// startListenerLocked is startListener with d.mu held.
func (d *Driver) startListenerLocked() {
	if d.closed || d.lis != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.lis = &listener{cancel: cancel, done: make(chan struct{})}
	go d.listen(ctx, d.lis.done)
}

// subscribers returns the callbacks; the caller holds d.mu.
func (d *Driver) subscribers() []func(drivers.Event) {
	fns := make([]func(drivers.Event), 0, len(d.subs))
	for _, fn := range d.subs {
		fns = append(fns, fn)
	}
	return fns
}

// listen keeps a LISTEN connection until ctx ends.
func (d *Driver) listen(ctx context.Context, done chan struct{}) {
	defer close(done)
	backoff := 100 * time.Millisecond
	for {
		start := time.Now()
		d.listenOnce(ctx)
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

// listenOnce connects, listens and delivers notifications (to the waiting
// acquisitions, then to the subscribers) until the connection fails or ctx
// ends.
func (d *Driver) listenOnce(ctx context.Context) {
	conn, err := pgx.ConnectConfig(ctx, d.connCfg)
	if err != nil {
		return
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, sessionSetup); err != nil {
		return
	}
	if _, err := conn.Exec(ctx, "LISTEN "+d.names.channel); err != nil {
		return
	}
	if d.opts.Mode == ModeTable {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ownChannel(d.id)}.Sanitize()); err != nil {
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
		d.wake(n.Payload)
		d.mu.Lock()
		fns := d.subscribers()
		d.mu.Unlock()
		ev := drivers.Event{Kind: drivers.Released, Key: n.Payload}
		for _, fn := range fns {
			fn(ev)
		}
	}
}
