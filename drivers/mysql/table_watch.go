package mysql

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// watchInterest is how long a key stays watched after its last failed
// acquisition (a waiting component retries at least every second).
const watchInterest = 2 * time.Second

// maxInterests is how many keys a driver keeps before it forgets those
// not asked for within watchInterest itself (its poller runs only once a
// subscribed driver's acquisition failed).
const maxInterests = 1024

// watcher gives table mode its wake-ups and its waiters' places. MySQL
// pushes nothing, so while someone is subscribed a goroutine reads the
// keys this driver found held, in one query, and sends Released (a prompt
// to ask again) when a key became free for this driver, when it should
// join the queue, and when its entry needs a stamp. It polls every
// PollInterval, faster nearer the head (settings.pollEvery), and when a
// stamp falls due: an entry unstamped for WaiterLiveness is dead, and a
// later arrival would overtake its waiter.
type watcher struct {
	d *tableDriver

	mu   sync.Mutex
	keys map[string]*interest

	once sync.Once
	wg   sync.WaitGroup
}

// interest is this driver's wait for one key.
type interest struct {
	asked   time.Time // last failed acquisition
	stamped time.Time // last failed acquisition that stamped its queue entry
	prompt  time.Time // last Released sent for it
	others  time.Time // this driver released it while others queued
	pos     int       // place in the key's queue when last polled, -1: none
}

// acquire's first statements (plan).
const (
	planRetake = iota // the plain UPDATE: not waited for
	planHead          // the plain UPDATE alone
	planTake          // the short statement, then maybe the queueing one
	planQueue         // the queueing statement alone
)

// plan picks acquire's first statement for key: the plain UPDATE alone
// when this driver heads its queue (as last polled) with a fresh entry,
// the queueing one when its entry needs a stamp or others queue first (as
// polled, or just after it released key to them).
func (w *watcher) plan(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	in := w.keys[key]
	switch {
	case in == nil:
		return planRetake
	case in.pos == 0 && time.Since(in.stamped) < w.d.s.liveness/2:
		return planHead
	case in.pos >= 0 || time.Since(in.others) < w.d.s.liveness/2:
		return planQueue
	case time.Since(in.asked) < watchInterest:
		return planTake
	}
	return planRetake
}

// contended notes that this driver released key while others queued: its
// next attempt joins the queue in one statement (plan). Not a wait: the
// poller reads no key for it.
func (w *watcher) contended(key string) {
	now := time.Now()
	w.mu.Lock()
	if len(w.keys) >= maxInterests {
		w.pruneLocked(now)
	}
	w.keys[key] = &interest{others: now, pos: -1}
	w.mu.Unlock()
}

// failed records and watches a failed acquisition of key started at
// start (stamped: it stamped the entry, whose age counts from start). It
// returns how soon to ask again: fastPoll at the head (its attempts are
// then the polls), else 0.
func (w *watcher) failed(key string, stamped bool, start time.Time) (retry time.Duration) {
	now := time.Now()
	w.mu.Lock()
	in := w.keys[key]
	if in == nil {
		in = &interest{pos: -1}
		w.keys[key] = in
	}
	in.asked = now
	if stamped {
		in.stamped = start
	}
	if in.pos == 0 { // the component waits this plus a millisecond
		retry = max(w.d.s.fastPoll()-time.Millisecond, time.Microsecond)
	}
	if len(w.keys) > maxInterests { // unsubscribed drivers have no poller pruning
		w.pruneLocked(now)
	}
	w.mu.Unlock()
	if w.d.subs.Len() > 0 {
		w.once.Do(w.start)
	}
	return retry
}

// pruneLocked forgets the keys not asked for within watchInterest (w.mu held).
func (w *watcher) pruneLocked(now time.Time) {
	for k, in := range w.keys {
		if now.Sub(in.asked) >= watchInterest {
			delete(w.keys, k)
		}
	}
}

// remove forgets key (acquired through this driver).
func (w *watcher) remove(key string) {
	w.mu.Lock()
	delete(w.keys, key)
	w.mu.Unlock()
}

// start starts the polling goroutine; it ends with Close.
func (w *watcher) start() {
	w.wg.Go(func() {
		t := time.NewTimer(w.sleep())
		defer t.Stop()
		for {
			select {
			case <-w.d.life.Closing().Done():
				return
			case <-t.C:
			}
			t.Reset(w.poll(w.d.life.Closing()))
		}
	})
}

// keyState is a watched key's row as poll reads it.
type keyState struct {
	free     bool
	mineHeld bool // held by this driver
	pos      int  // this driver's place in the queue, -1: not queued
	n        int  // queue entries
	lead     int  // dead entries at its head (up to pruneDepth)
}

// poll reads the watched keys, prompts their waiters and returns when to
// poll next.
func (w *watcher) poll(ctx context.Context) (next time.Duration) {
	next = w.sleep()
	now := time.Now()
	w.mu.Lock()
	w.pruneLocked(now)
	keys := slices.Collect(maps.Keys(w.keys))
	w.mu.Unlock()
	if len(keys) == 0 {
		return next
	}
	pctx, cancel := context.WithTimeout(ctx, max(w.d.s.poll, time.Second))
	defer cancel()
	for chunk := range slices.Chunk(keys, w.d.s.batch) {
		states, err := w.read(pctx, chunk)
		if err != nil {
			return next // the waiters poll on their own meanwhile
		}
		for i, k := range chunk {
			prompt, every := w.judge(k, states[i])
			next = min(next, every)
			if prompt {
				w.d.subs.Publish(drivers.Event{Kind: drivers.Released, Key: k})
			}
		}
	}
	return next
}

// judge decides whether to prompt key's waiter now, and when to poll again.
func (w *watcher) judge(key string, st keyState) (prompt bool, every time.Duration) {
	now := time.Now()
	s := w.d.s
	w.mu.Lock()
	defer w.mu.Unlock()
	in := w.keys[key]
	if in == nil {
		return false, s.poll
	}
	if s.liveness == 0 { // no queue: wake on free, once
		if st.free {
			delete(w.keys, key)
		}
		return st.free, s.poll
	}
	before := st.n
	if st.pos >= 0 {
		before = st.pos
	}
	allowed := st.free && before <= st.lead
	refresh := st.pos >= 0 && now.Sub(in.stamped) >= s.liveness/2
	// A new head is prompted once: its attempts then poll (see failed).
	headed := st.pos == 0 && in.pos != 0
	in.pos = st.pos
	join := st.pos < 0 && !allowed && st.n < maxQueue && !(st.mineHeld && st.n == 0)
	switch {
	case allowed:
		every = s.fastPoll()
	case st.pos == 0 && now.Sub(in.asked) < 3*s.fastPoll():
		every = s.poll // its attempts poll
	case st.pos >= 0:
		every = s.pollEvery(st.pos - st.lead)
	default:
		every = s.poll
	}
	if st.pos >= 0 && !refresh { // its waiter is prompted when its entry needs a stamp
		every = min(every, max(in.stamped.Add(s.liveness/2).Sub(now), s.fastPoll()))
	}
	// Prompt again once the waiter answered the last prompt, or two fast
	// polls later (a component no longer waiting ignores it).
	if (allowed || refresh || join || headed) && (in.asked.After(in.prompt) || now.Sub(in.prompt) >= 2*s.fastPoll()) {
		in.prompt = now
		return true, every
	}
	return false, every
}

// sleep is the longest the poller sleeps: PollInterval, at most
// WaiterLiveness/2, so that an entry queued meanwhile is looked at by the
// time its stamp falls due.
func (w *watcher) sleep() time.Duration {
	if l := w.d.s.liveness / 2; l > 0 {
		return min(w.d.s.poll, l)
	}
	return w.d.s.poll
}

// read returns the state of chunk's keys (a missing row: free, no queue).
func (w *watcher) read(ctx context.Context, chunk []string) ([]keyState, error) {
	args := make([]any, 0, 1+len(chunk))
	args = append(args, w.d.id)
	for _, k := range chunk {
		args = append(args, sqlkit.KeyHash(k))
	}
	found := map[string]keyState{}
	var h []byte
	var st keyState
	if err := queryRows(ctx, w.d.db, w.d.s.pollSQL(len(chunk)), args,
		[]any{&h, &st.free, &st.mineHeld, &st.pos, &st.n, &st.lead},
		func() { found[string(h)] = st }); err != nil {
		return nil, err
	}
	out := make([]keyState, len(chunk))
	for i, k := range chunk {
		st, ok := found[string(sqlkit.KeyHash(k))]
		if !ok {
			st = keyState{free: true, pos: -1}
		}
		out[i] = st
	}
	return out, nil
}

func (w *watcher) close() {
	w.once.Do(func() {})
	w.wg.Wait()
}
