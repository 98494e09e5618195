package mysql

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
)

// watchInterest is how long a key stays watched after this driver's last
// failed table-mode acquisition of it; the component retries at least
// every second while it waits.
const watchInterest = 2 * time.Second

// watcher gives table mode its wake-ups and its waiters' standing. MySQL
// has no push channel, so while Acquire calls of this driver find keys held
// and someone is subscribed, one goroutine reads all those keys in one
// query and sends Released (a prompt to ask again) when a key became free
// for this driver, when this driver may claim the key's reservation, and,
// while it holds the reservation, every WaiterLiveness/4 to keep it (see
// fair.go). It polls every PollInterval, or PollInterval/10 (at least
// 1ms) while it holds or may claim a reservation, so that the reserved
// waiter takes a released lock within a few milliseconds.
type watcher struct {
	d *Driver

	mu   sync.Mutex
	keys map[string]*interest

	once sync.Once
	wg   sync.WaitGroup
}

// interest is this driver's wait for one key.
type interest struct {
	since  time.Time // first failed acquisition of this wait
	asked  time.Time // last failed acquisition
	prompt time.Time // last Released sent for it
}

func (w *watcher) init(d *Driver) {
	w.d = d
	w.keys = map[string]*interest{}
}

// waited is how long this driver has been waiting for key (0: not).
func (w *watcher) waited(key string) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if in := w.keys[key]; in != nil && time.Since(in.asked) < watchInterest {
		return time.Since(in.since)
	}
	return 0
}

// failed records a failed acquisition of key and watches it.
func (w *watcher) failed(key string) {
	now := time.Now()
	w.mu.Lock()
	in := w.keys[key]
	if in == nil || now.Sub(in.asked) >= watchInterest {
		in = &interest{since: now}
		w.keys[key] = in
	}
	in.asked = now
	if len(w.keys) > 1024 { // unsubscribed drivers have no poller pruning
		for k, in := range w.keys {
			if now.Sub(in.asked) >= watchInterest {
				delete(w.keys, k)
			}
		}
	}
	w.mu.Unlock()
	if w.d.subscribed() {
		w.once.Do(w.start)
	}
}

// remove forgets key (acquired through this driver).
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
		t := time.NewTimer(w.d.s.poll)
		defer t.Stop()
		for {
			select {
			case <-w.d.closed:
				return
			case <-t.C:
			}
			next := w.d.s.poll
			if w.poll(ctx) {
				next = w.d.s.fastPoll()
			}
			t.Reset(next)
		}
	}()
}

// keyState is a watched key's row as poll reads it.
type keyState struct {
	free, live, mine, anon, tookIt bool
	slotAge                        time.Duration // how long the reservation's driver has waited
}

// poll reads the watched keys and prompts their waiters; it reports
// whether one of them should be polled fast.
func (w *watcher) poll(ctx context.Context) (fast bool) {
	now := time.Now()
	w.mu.Lock()
	keys := make([]string, 0, len(w.keys))
	for k, in := range w.keys {
		if now.Sub(in.asked) >= watchInterest {
			delete(w.keys, k)
			continue
		}
		keys = append(keys, k)
	}
	w.mu.Unlock()
	if len(keys) == 0 {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, max(w.d.s.poll, time.Second))
	defer cancel()
	for start := 0; start < len(keys); start += w.d.s.batch {
		chunk := keys[start:min(start+w.d.s.batch, len(keys))]
		states, err := w.read(pctx, chunk)
		if err != nil {
			return false // the waiters poll on their own meanwhile
		}
		for i, k := range chunk {
			prompt, f := w.judge(k, states[i])
			fast = fast || f
			if prompt {
				w.d.emit(drivers.Event{Kind: drivers.Released, Key: k})
			}
		}
	}
	return fast
}

// judge decides, for key in state st, whether to prompt its waiter to ask
// again now and whether to poll it fast.
func (w *watcher) judge(key string, st keyState) (prompt, fast bool) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	in := w.keys[key]
	if in == nil {
		return false, false
	}
	if w.d.s.liveness == 0 { // no reservations: wake on free, once
		if st.free {
			delete(w.keys, key)
		}
		return st.free, false
	}
	age := now.Sub(in.since)
	allowed := !st.live || st.mine || (st.anon && !st.tookIt) || (!st.anon && age >= st.slotAge)
	claim := !st.live || (st.anon && !st.tookIt) || (!st.anon && !st.mine && age > st.slotAge)
	keep := st.live && st.mine && now.Sub(in.asked) >= w.d.s.liveness/4
	fast = st.mine || claim || (st.free && allowed)
	want := (st.free && allowed) || claim || keep
	// Prompt again once the waiter answered the last prompt (or, if it did
	// not ask, two fast polls later: a component no longer waiting ignores
	// prompts, and its reservation runs out).
	if want && (in.asked.After(in.prompt) || now.Sub(in.prompt) >= 2*w.d.s.fastPoll()) {
		in.prompt = now
		return true, fast
	}
	return false, fast
}

// read returns the state of chunk's keys; a missing row is free and
// unreserved.
func (w *watcher) read(ctx context.Context, chunk []string) ([]keyState, error) {
	args := make([]any, 0, 2+len(chunk))
	args = append(args, w.d.id, w.d.id)
	for _, k := range chunk {
		args = append(args, keyHash(k))
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(chunk)), ",")
	rows, err := w.d.db.QueryContext(ctx, fmt.Sprintf(`SELECT name_hash, expires_at < UTC_TIMESTAMP(6), wanted_until >= UTC_TIMESTAMP(6),
 wanted_by = ?, wanted_by = '', taken_by = ?, TIMESTAMPDIFF(MICROSECOND, wanted_since, UTC_TIMESTAMP(6))
FROM %s WHERE name_hash IN (%s)`, w.d.s.table, marks), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := map[string]keyState{}
	for rows.Next() {
		var h []byte
		var st keyState
		var ageUS int64
		if err := rows.Scan(&h, &st.free, &st.live, &st.mine, &st.anon, &st.tookIt, &ageUS); err != nil {
			return nil, err
		}
		st.slotAge = time.Duration(ageUS) * time.Microsecond
		found[string(h)] = st
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]keyState, len(chunk))
	for i, k := range chunk {
		st, ok := found[string(keyHash(k))]
		if !ok {
			st = keyState{free: true}
		}
		out[i] = st
	}
	return out, nil
}

func (w *watcher) close() {
	w.once.Do(func() {})
	w.wg.Wait()
}
