package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"time"
)

// idleConn is a connection kept for the next acquisition.
type idleConn struct {
	conn pinned
	at   time.Time
}

// Up to keepConns connections are kept between acquisitions, each for up
// to keepFor, rather than go through the pool, whose liveness check (a
// read system call per hand-out) costs about 4% of an acquire+release
// pair; a timer returns them (expireIdle). One found dead is replaced.
const (
	keepConns = 2
	keepFor   = time.Second
)

// getConn returns the most recently kept connection (cached) or one from
// the pool. A kept connection past keepFor is expireIdle's to return.
func (a *advisoryDriver) getConn(ctx context.Context) (conn pinned, cached bool, err error) {
	a.mu.Lock()
	if n := len(a.idle); n > 0 && time.Since(a.idle[n-1].at) < keepFor {
		conn = a.idle[n-1].conn
		a.idle[n-1] = idleConn{}
		a.idle = a.idle[:n-1]
	}
	a.mu.Unlock()
	if conn.conn != nil {
		return conn, true, nil
	}
	conn, err = a.poolConn(ctx)
	return conn, false, err
}

// poolConn returns a connection from the pool, with its socket if known.
func (a *advisoryDriver) poolConn(ctx context.Context) (pinned, error) {
	conn, err := a.db.Conn(ctx)
	if err != nil {
		return pinned{}, err
	}
	return pinned{conn, a.socks.of(conn)}, nil
}

// putConn keeps conn, which holds no lock, for the next acquisition, or
// returns it to the pool.
func (a *advisoryDriver) putConn(conn pinned) {
	conn.disarmHangup()
	a.mu.Lock()
	if len(a.idle) < keepConns && !a.life.Closed() {
		a.idle = append(a.idle, idleConn{conn, time.Now()})
		conn.conn = nil
		if a.idleTimer == nil {
			a.armIdleLocked(keepFor)
		}
	}
	a.mu.Unlock()
	if conn.conn != nil {
		conn.conn.Close()
	}
}

// armIdleLocked runs expireIdle after d (a.mu held).
func (a *advisoryDriver) armIdleLocked(d time.Duration) {
	a.idleWG.Add(1)
	a.idleTimer = time.AfterFunc(d, a.expireIdle)
}

// expireIdle returns the connections kept for keepFor, and arms the timer
// for the others.
func (a *advisoryDriver) expireIdle() {
	defer a.idleWG.Done()
	now := time.Now()
	var stale []*sql.Conn
	a.mu.Lock()
	a.idleTimer = nil
	kept := a.idle[:0] // oldest first
	for _, c := range a.idle {
		if now.Sub(c.at) >= keepFor {
			stale = append(stale, c.conn.conn)
		} else {
			kept = append(kept, c)
		}
	}
	clear(a.idle[len(kept):])
	a.idle = kept
	if len(kept) > 0 && !a.life.Closed() {
		a.armIdleLocked(keepFor - now.Sub(kept[0].at))
	}
	a.mu.Unlock()
	for _, c := range stale {
		c.Close()
	}
}

// closeIdle returns the kept connections and stops the timer, waiting for
// its function (the driver is closing: nothing is kept any more).
func (a *advisoryDriver) closeIdle() {
	a.mu.Lock()
	idle := a.idle
	a.idle = nil
	if a.idleTimer != nil && a.idleTimer.Stop() {
		a.idleWG.Done()
	}
	a.idleTimer = nil
	a.mu.Unlock()
	a.idleWG.Wait()
	for _, c := range idle {
		c.conn.conn.Close()
	}
}

// discard closes conn's session instead of returning it to the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
