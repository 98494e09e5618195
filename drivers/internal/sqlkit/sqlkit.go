// Package sqlkit holds the machinery the SQL drivers (mysql, postgres)
// share around their stores' statements: a driver's life and its Close
// (Life), the connections it dialled, cut together on Close (Conns), the
// state of its schema (Schema), the statement slot of a pinned connection
// (Slot), the clean-up of a table's rows (Reclaimer), the holder part of a
// token and its writing (Identity, Identify) and the hash that keys a lock
// in the store (KeyHash).
package sqlkit

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/lifectx"
	"github.com/mutexfx/mutexfx/internal/reclaim"
)

// Life is a driver's life. It is closed when Close starts, and its calls
// in flight are cut (their contexts, bound with Bind, end with cause
// drivers.ErrClosed) when Close's ctx ends or Close is done, whichever
// comes first, rather than waited for: a statement may be stuck on a
// stalled link. Call Init before use.
type Life struct {
	began   atomic.Bool
	closing context.Context // ends when Close starts: the driver's goroutines end
	stop    context.CancelFunc
	life    context.Context // ends when the calls in flight are cut
	cut     context.CancelCauseFunc
	done    chan struct{} // closed when the first Close returns
}

// Init makes l open.
func (l *Life) Init() {
	l.closing, l.stop = context.WithCancel(context.Background())
	l.life, l.cut = context.WithCancelCause(context.Background())
	l.done = make(chan struct{})
}

// Closed reports whether Close started.
func (l *Life) Closed() bool { return l.closing.Err() != nil }

// Closing ends when Close starts: the driver's goroutines watch it.
func (l *Life) Closing() context.Context { return l.closing }

// Bind returns ctx, also cancelled (cause drivers.ErrClosed) when the
// calls in flight are cut, and the function to call when done with it.
func (l *Life) Bind(ctx context.Context) (context.Context, func()) {
	return lifectx.Bind(ctx, l.life, drivers.ErrClosed)
}

// Check returns ctx's error, or drivers.ErrClosed once Close started.
func (l *Life) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.Closed() {
		return drivers.ErrClosed
	}
	return nil
}

// ClosedErr marks err, the failure of a call made or cut while Close runs
// or after it, as drivers.ErrClosed.
func (l *Life) ClosedErr(err error) error {
	if err != nil && l.Closed() && !errors.Is(err, drivers.ErrClosed) {
		return fmt.Errorf("%w: %w", drivers.ErrClosed, err)
	}
	return err
}

// Close is a driver's idempotent Close. The first call marks l closed,
// runs begin (if not nil: the driver takes, under its own mutex, what
// Close ends), then release (the driver lets its connections go), and
// cuts the calls in flight, then calls cut (if not nil), when ctx ends or
// release is done. It returns release's error, or ctx's when ctx ended
// first (calls may have been cut), named for driver ("mysql: close:
// ..."). A later call returns when the first is done, or with ctx's error.
func (l *Life) Close(ctx context.Context, driver string, begin func(), release func(context.Context) error, cut func()) error {
	if l.began.Swap(true) {
		select {
		case <-l.done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%s: close: %w", driver, ctx.Err())
		}
	}
	l.stop()
	defer close(l.done)
	if begin != nil {
		begin()
	}
	end := func() {
		l.cut(drivers.ErrClosed)
		if cut != nil {
			cut()
		}
	}
	defer end()
	after := context.AfterFunc(ctx, end)
	err := release(ctx)
	if !after() && err == nil {
		err = fmt.Errorf("%s: close: %w", driver, ctx.Err())
	}
	return err
}

// Schema is whether a driver's schema (its tables, sequences...) is known
// to exist: created by one call at a time, once, and again after Lost. Its
// mutex, held while the schema is created, also guards what the creation
// finds out.
type Schema struct {
	sync.Mutex
	ready bool
}

// Ensure runs create unless it succeeded since the last Lost.
func (s *Schema) Ensure(ctx context.Context, create func(context.Context) error) error {
	s.Lock()
	defer s.Unlock()
	if s.ready {
		return nil
	}
	err := create(ctx)
	s.ready = err == nil
	return err
}

// Lost makes the next Ensure create the schema again (a statement found
// part of it missing).
func (s *Schema) Lost() {
	s.Lock()
	s.ready = false
	s.Unlock()
}

// Run runs f, a statement, after ensure (the driver's Ensure of s) and,
// when f's error says that the schema is gone (missing: an operator
// dropped a table), once more after creating it again.
func (s *Schema) Run(ensure func() error, missing func(error) bool, f func() error) error {
	for again := true; ; again = false {
		if err := ensure(); err != nil {
			return err
		}
		err := f()
		if !again || err == nil || !missing(err) {
			return err
		}
		s.Lost()
	}
}

// Slot is a mutex that can also be waited for until a context ends: the
// right to run statements on a pinned connection. Its zero value is free.
type Slot struct {
	once sync.Once
	ch   chan struct{}
}

func (s *Slot) c() chan struct{} {
	s.once.Do(func() { s.ch = make(chan struct{}, 1) })
	return s.ch
}

// Lock waits for s.
func (s *Slot) Lock() { s.c() <- struct{}{} }

// TryLock takes s if it is free.
func (s *Slot) TryLock() bool {
	select {
	case s.c() <- struct{}{}:
		return true
	default:
		return false
	}
}

// LockContext waits for s until ctx, or also (if not nil), ends, and
// returns the cause of the one that ended; a free s is taken even then.
func (s *Slot) LockContext(ctx, also context.Context) error {
	if s.TryLock() {
		return nil
	}
	var done <-chan struct{}
	if also != nil {
		done = also.Done()
	}
	select {
	case s.c() <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-done:
		return context.Cause(also)
	}
}

// Unlock frees s.
func (s *Slot) Unlock() { <-s.c() }

// Identity is the part of a token that names its holder
// (drivers.LockInfo.Holder), as a store shows it to other sessions: the
// token from its first '~' to its last, exclusive ("~app~host~pid" of a
// component.Mutex's token, without its random part); "" when the token
// names none, or when the identity is longer than limit bytes (0: no
// limit).
func Identity(token string, limit int) string {
	i, j := strings.IndexByte(token, '~'), strings.LastIndexByte(token, '~')
	if i < 0 || j <= i || limit > 0 && j-i > limit {
		return ""
	}
	return token[i:j]
}

// Identify shows token's identity (Identity, limit) where the store shows
// a connection's holder, by write, unless *shown, what the connection
// shows since its last write, is that identity already; it then records
// it in *shown. A connection changes holders often, its identity seldom:
// most acquisitions write nothing.
func Identify(shown *string, token string, limit int, write func(id string) error) error {
	id := Identity(token, limit)
	if id == *shown {
		return nil
	}
	if err := write(id); err != nil {
		return err
	}
	*shown = id
	return nil
}

// KeyHash is the SHA-256 of a lock's key: its row's primary key and the
// source of its advisory lock's name or number, fixed-size and case-exact
// for any key.
func KeyHash(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// Reclaimer is a table driver's clean-up (package reclaim): every half of
// the longest ttl noted, it drains the reclaimable rows (Drain). Set Batch
// and Round before the first Note.
type Reclaimer struct {
	reclaim.Loop
	// Batch is the most rows a Round deletes.
	Batch int64
	// Round deletes up to Batch reclaimable rows and returns how many.
	Round func(context.Context) (int64, error)
}

// Note starts the reclaimer, or makes it run at least every ttl/2.
func (r *Reclaimer) Note(ttl time.Duration) {
	r.Loop.Note(ttl, func(ctx context.Context) { _, _ = r.Drain(ctx) })
}

// Drain runs Round until a round deletes fewer than Batch rows or fails;
// it returns how many rows it deleted.
func (r *Reclaimer) Drain(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := r.Round(ctx)
		total += n
		if err != nil || n < r.Batch {
			return total, err
		}
	}
}
