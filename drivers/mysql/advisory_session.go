package mysql

import (
	"context"
	"database/sql"
	"errors"

	gomysql "github.com/go-sql-driver/mysql"
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
// 0.04–0.07 × a bare GET_LOCK + RELEASE_LOCK pair on MariaDB here, every
// acquisition. The first acquisition on a connection reads the session
// and the server's boot time in one statement (the boot time costs about
// 0.3 ms, once per connection). That boot time is also the one a lock
// taken on the connection starts with (heldLock.boot): a probe that finds
// another boot time reports the lock lost, whatever the clock did.
//
// A connection made in the server's first seconds is not kept that way
// until one of its acquisitions reads the clock past them (with a second
// more than a probe allows, since each boot time read may be off by one):
// until then the acquisition reads the session in its own statement, as
// on a pool given to NewWithDB, where sockets are unknown.
//
// This assumes, as advisory locks do anyway (RELEASE_LOCK must run in the
// session that took the lock), that a client connection is one server
// session for its whole life: true of a direct connection, not of a proxy
// that moves a client connection between server connections.

// session identifies a connection of a server's life: its CONNECTION_ID()
// and the server's clock (takenSQL) at a moment of that session — read in
// the acquire statement, or once per connection (advisory_session.go). Ids start
// again from 1 when the server restarts, so the id alone could name another
// client's session: a probe also compares the time with the server's boot
// time (advisory_boot.go), and with the boot time read with the session, when it
// was (boot; 0: not read). wait is the session's wait_timeout in seconds:
// the server closes the connection after that long without a statement
// (advisory_idle.go).
type session struct {
	conn int64
	at   int64
	boot int64
	wait int64
}

// sessionSQL reads a connection's session: its id, the server's clock and
// the session's wait_timeout (advisory_idle.go).
const sessionSQL = "CONNECTION_ID(), " + takenSQL + ", @@wait_timeout"

// Values of socket.boot besides a boot time.
const (
	bootUnread  = 0  // the session was never read
	bootNoCache = -1 // reading it failed on the server's side: read it with every acquisition
)

// session returns conn's session when it is known, reading it (with the
// server's boot time) if conn has never been asked; ok is false when it
// must be read with the acquisition (learn). An error is the connection's
// (the acquisition would meet it too); a statement the server refuses
// makes the connection's acquisitions read their session themselves.
func (a *advisoryDriver) session(ctx context.Context, conn pinned) (s session, ok bool, err error) {
	sock := conn.sock
	if sock == nil {
		return session{}, false, nil
	}
	if p := sock.sess.Load(); p != nil {
		return *p, true, nil
	}
	if sock.boot.Load() != bootUnread {
		return session{}, false, nil // made in the server's first seconds, or not to be kept
	}
	var boot sql.NullInt64
	err = a.withBoot(func(bootSQL string) error {
		return conn.queryRow(ctx, "SELECT "+sessionSQL+", "+bootSQL, nil, &s.conn, &s.at, &s.wait, &boot)
	})
	var me *gomysql.MySQLError
	switch {
	case errors.As(err, &me):
		sock.boot.Store(bootNoCache)
		return session{}, false, nil
	case err != nil:
		return session{}, false, err
	case !boot.Valid:
		// No boot time: probes compare ids alone.
		sock.sess.Store(&s)
		return s, true, nil
	}
	s.boot = boot.Int64
	if s.at > s.boot+2*bootSlack {
		sock.sess.Store(&s)
		return s, true, nil
	}
	sock.boot.Store(max(s.boot, 1))
	return session{}, false, nil
}

// learn keeps s, conn's session read by an acquisition, once it is past
// the first seconds of the server whose boot time conn's first session
// read found.
func (p pinned) learn(s session) {
	if p.sock == nil {
		return
	}
	if b := p.sock.boot.Load(); b > 0 && s.at > b+2*bootSlack {
		s.boot = b
		p.sock.sess.Store(&s)
	}
}
