package mysql

import (
	"context"
	"database/sql"
)

// A lock's session is what a probe compares with the server's answers
// (heldLock.holds): its connection's CONNECTION_ID(), and the server's
// clock at some moment of that session's life, which must be past the
// server's boot time and its first seconds (bootSlack) — so that after a
// restart, which gives ids from 1 again, another client's session with
// the same id is not taken for the holder's.
//
// Neither changes while the connection lives: a connection's id is fixed,
// and any reading of the clock during the session serves (a session of an
// earlier life of the server ended before the next boot). So on the
// driver's own pool, whose connections are known by their sockets, the
// session is read once per connection and kept with its socket, and the
// acquire statement then reads the fence alone: the two more columns cost
// about 0.1 × a bare GET_LOCK + RELEASE_LOCK pair on MariaDB here, every
// acquisition. The first acquisition on a connection reads the session
// and the server's boot time in one statement (the boot time costs about
// 0.3 ms, once per connection). A connection made in the server's first
// seconds is not kept that way until one of its acquisitions reads the
// clock past them: until then the acquisition reads the session in its own
// statement, as on a pool given to NewWithDB, where sockets are unknown.

// sessionSQL reads a connection's session: its id and the server's clock.
const sessionSQL = "CONNECTION_ID(), " + takenSQL

// session returns conn's session when it is known, reading it (with the
// server's boot time) if conn has never been asked; ok is false when it
// must be read with the acquisition (learn).
func (a *advisory) session(ctx context.Context, conn pinned) (s session, ok bool) {
	sock := conn.sock
	if sock == nil {
		return session{}, false
	}
	if p := sock.sess.Load(); p != nil {
		return *p, true
	}
	if sock.boot.Load() != 0 {
		return session{}, false // made in the server's first seconds
	}
	for {
		src := a.bootSrc.Load()
		var boot sql.NullInt64
		err := conn.queryRow(ctx, "SELECT "+sessionSQL+", "+a.bootSQL[src], nil, &s.conn, &s.at, &boot)
		if int(src) < len(a.bootSQL)-1 && noBootSource(err) {
			a.bootSrc.CompareAndSwap(src, src+1)
			continue
		}
		if err != nil {
			// The acquire statement reads it, and meets whatever
			// failed here.
			return session{}, false
		}
		if !boot.Valid || s.at > boot.Int64+bootSlack {
			// With no boot time, probes compare ids alone.
			sock.sess.Store(&s)
			return s, true
		}
		sock.boot.Store(max(boot.Int64, 1))
		return session{}, false
	}
}

// learn keeps s, conn's session read by an acquisition, once it is past
// the server's first seconds.
func (p pinned) learn(s session) {
	if p.sock == nil {
		return
	}
	if b := p.sock.boot.Load(); b != 0 && s.at > b+bootSlack {
		p.sock.sess.Store(&s)
	}
}
