//go:build linux || darwin || dragonfly || freebsd || openbsd || windows

package file

import (
	"context"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// busyFor is how long a lock found held stays in the busy map: its releases
// by other processes are reported, and attempts peek before opening for
// writing.
const busyFor = time.Minute

// busyEntry is a lock this driver found held recently.
type busyEntry struct {
	key string
	at  time.Time
}

// Subscribe calls fn with a Released event when a lock is released: at once
// for releases through this driver instance, and, for locks this driver
// found held in the last minute, when any process of the host closes the
// lock file after writing to it (a release, or the death of a holder) —
// through inotify on the directory, started at the first contention (on
// Linux; elsewhere only this instance's releases are reported and waiters
// poll). Lost events are never sent. Events are hints; spurious ones happen.
func (d *Driver) Subscribe(ctx context.Context, fn func(drivers.Event)) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	remove := d.subs.Add(fn)
	return func() {
		d.mu.Lock()
		var ws []*watcher
		if remove() {
			ws = d.takeWatchers()
		}
		d.mu.Unlock()
		for _, w := range ws {
			w.stop()
		}
	}, nil
}

// emit calls every subscriber with e, outside d.mu.
func (d *Driver) emit(e drivers.Event) { d.subs.Publish(e) }

// recentlyBusy reports whether the lock file name was found held recently.
func (d *Driver) recentlyBusy(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.busy[name]
	return ok && time.Since(e.at) < busyFor
}

// markBusy records that key (file name) was found held, and starts the
// directory watcher if someone subscribed.
func (d *Driver) markBusy(name, key string) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	now := time.Now()
	if len(d.busy) >= 1024 {
		for n, e := range d.busy {
			if now.Sub(e.at) >= busyFor {
				delete(d.busy, n)
			}
		}
	}
	d.busy[name] = busyEntry{key: key, at: now}
	start := (d.watch == nil || d.watch.dead) && d.subs.Len() > 0
	var w *watcher
	if start {
		if d.watch != nil {
			// not stopped here: this may run in a subscriber called by
			// its goroutine (gone), which stop would wait for
			d.retired = append(slices.DeleteFunc(d.retired, (*watcher).ended), d.watch)
		}
		w = &watcher{d: d, done: make(chan struct{})}
		d.watch = w
	}
	d.mu.Unlock()
	if start {
		// The watcher is optional: when it cannot start, waiters poll.
		w.start(d.opts.Dir)
	}
}

// watcher reads the close-after-write events of the lock directory
// (inotify; elsewhere it never starts, and waiters poll). Its goroutine is
// owned by the driver and ends when stop closes the descriptor.
type watcher struct {
	d       *Driver
	mu      sync.Mutex
	f       *os.File
	stopped bool
	done    chan struct{} // closed when run returns; only waited if f is set
	dead    bool          // its directory is gone (gone); guarded by d.mu
}

// stop closes the descriptor and waits for the goroutine to end.
func (w *watcher) stop() {
	w.mu.Lock()
	w.stopped = true
	f := w.f
	w.mu.Unlock()
	if f != nil {
		_ = f.Close()
		<-w.done
	}
}

// takeWatchers takes the driver's watchers, current and retired, for the
// caller to stop; d.mu held.
func (d *Driver) takeWatchers() []*watcher {
	ws := d.retired
	if d.watch != nil {
		ws = append(ws, d.watch)
	}
	d.watch, d.retired = nil, nil
	return ws
}

// ended reports whether w's goroutine has returned (or never ran).
func (w *watcher) ended() bool {
	w.mu.Lock()
	f := w.f
	w.mu.Unlock()
	if f == nil {
		return true
	}
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}
