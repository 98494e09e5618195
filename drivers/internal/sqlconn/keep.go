package sqlconn

import (
	"database/sql"
	"sync"
	"time"
)

// Keep keeps up to N connections that hold no lock, each for up to For,
// for the next acquisition rather than go through the pool, whose
// liveness check costs a read system call per hand-out. Its zero value
// keeps none; set N and For before use.
type Keep[S any] struct {
	N   int
	For time.Duration

	mu     sync.Mutex
	idle   []kept[S] // oldest first
	timer  *time.Timer
	wg     sync.WaitGroup // the timer's function
	closed bool
}

type kept[S any] struct {
	conn Pinned[S]
	at   time.Time
}

// Get returns the most recently kept connection, if one was kept for
// less than For.
func (k *Keep[S]) Get() (Pinned[S], bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if n := len(k.idle); n > 0 && time.Since(k.idle[n-1].at) < k.For {
		c := k.idle[n-1].conn
		k.idle[n-1] = kept[S]{}
		k.idle = k.idle[:n-1]
		return c, true
	}
	return Pinned[S]{}, false
}

// Put keeps conn, which holds no lock, or returns it to the pool when N
// are kept or Close was called.
func (k *Keep[S]) Put(conn Pinned[S]) {
	conn.DisarmHangup()
	k.mu.Lock()
	if len(k.idle) < k.N && !k.closed {
		k.idle = append(k.idle, kept[S]{conn, time.Now()})
		conn.Conn = nil
		if k.timer == nil {
			k.armLocked(k.For)
		}
	}
	k.mu.Unlock()
	if conn.Conn != nil {
		conn.Conn.Close()
	}
}

// armLocked runs expire after d (k.mu held).
func (k *Keep[S]) armLocked(d time.Duration) {
	k.wg.Add(1)
	k.timer = time.AfterFunc(d, k.expire)
}

// expire returns the connections kept for For, and arms the timer for the
// others.
func (k *Keep[S]) expire() {
	defer k.wg.Done()
	now := time.Now()
	var stale []*sql.Conn
	k.mu.Lock()
	k.timer = nil
	fresh := k.idle[:0]
	for _, c := range k.idle {
		if now.Sub(c.at) >= k.For {
			stale = append(stale, c.conn.Conn)
		} else {
			fresh = append(fresh, c)
		}
	}
	clear(k.idle[len(fresh):])
	k.idle = fresh
	if len(fresh) > 0 && !k.closed {
		k.armLocked(k.For - now.Sub(fresh[0].at))
	}
	k.mu.Unlock()
	for _, c := range stale {
		c.Close()
	}
}

// Close returns the kept connections and stops the timer, waiting for its
// function; later Puts keep nothing.
func (k *Keep[S]) Close() {
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
