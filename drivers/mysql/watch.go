package mysql

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// watchInterest is how long a failed table-mode acquisition keeps its key
// watched; the component retries at least every second.
const watchInterest = 2 * time.Second

// watcher gives table mode its wake-ups: MySQL has no push channel, so
// while Acquire calls of this driver find keys held and someone is
// subscribed, one goroutine checks all those keys in one query every
// PollInterval and sends Released for the ones that became free (released
// by any process, or expired). Waiters then retry at once instead of
// sleeping their retry delay.
type watcher struct {
	d *Driver

	mu   sync.Mutex
	keys map[string]time.Time // key → end of interest

	once sync.Once
	wg   sync.WaitGroup
}

func (w *watcher) init(d *Driver) {
	w.d = d
	w.keys = map[string]time.Time{}
}

// add watches key (found held) for a while.
func (w *watcher) add(key string) {
	if !w.d.subscribed() {
		return
	}
	w.mu.Lock()
	w.keys[key] = time.Now().Add(watchInterest)
	w.mu.Unlock()
	w.once.Do(w.start)
}

// remove stops watching key (acquired through this driver).
func (w *watcher) remove(key string) {
	w.mu.Lock()
	delete(w.keys, key)
	w.mu.Unlock()
}

func (w *watcher) start() {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { // ends with the watcher or the driver
			select {
			case <-w.d.closed:
				cancel()
			case <-ctx.Done():
			}
		}()
		t := time.NewTicker(w.d.s.poll)
		defer t.Stop()
		for {
			select {
			case <-w.d.closed:
				return
			case <-t.C:
			}
			w.poll(ctx)
		}
	}()
}

// poll sends Released for every watched key that is free now.
func (w *watcher) poll(ctx context.Context) {
	now := time.Now()
	w.mu.Lock()
	keys := make([]string, 0, len(w.keys))
	for k, until := range w.keys {
		if now.After(until) {
			delete(w.keys, k)
			continue
		}
		keys = append(keys, k)
	}
	w.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, max(w.d.s.poll, time.Second))
	defer cancel()
	for start := 0; start < len(keys); start += w.d.s.batch {
		chunk := keys[start:min(start+w.d.s.batch, len(keys))]
		free, err := w.freeKeys(pctx, chunk)
		if err != nil {
			return // the waiters poll on their own meanwhile
		}
		for _, k := range free {
			w.remove(k)
			w.d.emit(drivers.Event{Kind: drivers.Released, Key: k})
		}
	}
}

// freeKeys returns the keys of chunk whose row is missing or expired.
func (w *watcher) freeKeys(ctx context.Context, chunk []string) ([]string, error) {
	args := make([]any, len(chunk))
	for i, k := range chunk {
		args[i] = keyHash(k)
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(chunk)), ",")
	rows, err := w.d.db.QueryContext(ctx, fmt.Sprintf(
		`SELECT name_hash FROM %s WHERE name_hash IN (%s) AND expires_at >= UTC_TIMESTAMP(6)`, w.d.s.table, marks), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	held := map[string]bool{}
	for rows.Next() {
		var h []byte
		if err := rows.Scan(&h); err != nil {
			return nil, err
		}
		held[string(h)] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var free []string
	for i, k := range chunk {
		if !held[string(args[i].([]byte))] {
			free = append(free, k)
		}
	}
	return free, nil
}

func (w *watcher) close() {
	w.once.Do(func() {})
	w.wg.Wait()
}
