package dbconn

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// Keeper keeps up to n pinned connections between uses, each for up to a
// time, rather than hand them back to the pool, whose liveness check (a
// read system call per hand-out with go-sql-driver) costs a few percent of
// a short use. Its zero value is not ready: use NewKeeper.
type Keeper[T any] struct {
	db    *sql.DB
	socks *Sockets[T]
	n     int
	keep  time.Duration

	mu     sync.Mutex
	idle   []kept[T]      // most recent last
	timer  *time.Timer    // returns kept connections to the pool
	wg     sync.WaitGroup // timer's function, armed or running
	closed bool           // Close ran: keep no more
}

// kept is a connection kept for the next use.
type kept[T any] struct {
	conn Pinned[T]
	at   time.Time
}

// NewKeeper returns a Keeper of up to n of db's connections (socks: their
// sockets, may be nil), each kept for up to keep, until Close.
func NewKeeper[T any](db *sql.DB, socks *Sockets[T], n int, keep time.Duration) *Keeper[T] {
	return &Keeper[T]{db: db, socks: socks, n: n, keep: keep}
}

// Get returns the most recently kept connection (cached) or one from the
// pool.
func (k *Keeper[T]) Get(ctx context.Context) (conn Pinned[T], cached bool, err error) {
	k.mu.Lock()
	if n := len(k.idle); n > 0 && time.Since(k.idle[n-1].at) < k.keep {
		conn = k.idle[n-1].conn
		k.idle[n-1] = kept[T]{}
		k.idle = k.idle[:n-1]
	}
	k.mu.Unlock()
	if conn.Conn != nil {
		return conn, true, nil
	}
	conn, err = k.Pin(ctx)
	return conn, false, err
}

// Pin returns a connection from the pool, with its socket if known.
func (k *Keeper[T]) Pin(ctx context.Context) (Pinned[T], error) {
	return k.socks.Pin(ctx, k.db)
}

// Put keeps conn, which holds nothing, for the next use, or returns it to
// the pool.
func (k *Keeper[T]) Put(conn Pinned[T]) {
	conn.DisarmHangup()
	k.mu.Lock()
	if len(k.idle) < k.n && !k.closed {
		k.idle = append(k.idle, kept[T]{conn, time.Now()})
		conn.Conn = nil
		if k.timer == nil {
			k.armLocked(k.keep)
		}
	}
	k.mu.Unlock()
	if conn.Conn != nil {
		conn.Conn.Close()
	}
}

// armLocked runs expire after d (k.mu held).
func (k *Keeper[T]) armLocked(d time.Duration) {
	k.wg.Add(1)
	k.timer = time.AfterFunc(d, k.expire)
}

// expire returns the connections kept for k.keep, and arms the timer for
// the others.
func (k *Keeper[T]) expire() {
	defer k.wg.Done()
	now := time.Now()
	var stale []*sql.Conn
	k.mu.Lock()
	k.timer = nil
	fresh := k.idle[:0] // oldest first
	for _, c := range k.idle {
		if now.Sub(c.at) >= k.keep {
			stale = append(stale, c.conn.Conn)
		} else {
			fresh = append(fresh, c)
		}
	}
	clear(k.idle[len(fresh):])
	k.idle = fresh
	if len(fresh) > 0 && !k.closed {
		k.armLocked(k.keep - now.Sub(fresh[0].at))
	}
	k.mu.Unlock()
	for _, c := range stale {
		c.Close()
	}
}

// Close returns the kept connections and stops the timer, waiting for its
// function; later Puts return theirs to the pool.
func (k *Keeper[T]) Close() {
	k.mu.Lock()
	k.closed = true
	idle := k.idle
	k.idle = nil
	if k.timer != nil && k.timer.Stop() {
		k.wg.Done()
	}
	k.timer = nil
	k.mu.Unlock()
	k.wg.Wait()
	for _, c := range idle {
		c.conn.Conn.Close()
	}
}
