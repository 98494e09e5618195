package mysql

import (
	"context"
	"database/sql"
)

// A lock's session is what a probe compares with the server's answers
// (heldLock.holds): its CONNECTION_ID() and the server's clock past the
// boot time and its first seconds (bootSlack), so that after a restart
// another session with the same id is not taken for it. Neither changes
// while the connection lives, so on the own pool it is read once per
// connection, with the boot time, and kept with its socket; a lock starts
// with that boot time (heldLock.boot). Until the clock is past the first
// seconds, and on NewWithDB's pool, each acquisition reads the session in
// its statement. As advisory locks themselves, this assumes a client
// connection is one server session for life (not so behind a proxy that
// moves it).

// session is a connection's CONNECTION_ID(), the clock (takenSQL) during
// it, the boot time read with it (0: not read) and its wait_timeout in
// seconds (advisory_idle.go).
type session struct{ conn, at, boot, wait int64 }

// sessionSQL reads a connection's session (without the boot time).
const sessionSQL = "CONNECTION_ID(), " + takenSQL + ", @@wait_timeout"

// Values of socket.boot besides a boot time.
const (
	bootUnread  = 0  // the session was never read
	bootNoCache = -1 // the server refused to tell: each acquisition reads it
)

// session returns conn's session, reading it with the boot time if never
// asked; ok is false when the acquisition must read it (learn).
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
	switch {
	case errNumber(err) != 0:
		sock.boot.Store(bootNoCache)
		return session{}, false, nil
	case err != nil:
		return session{}, false, err
	case !boot.Valid: // probes compare ids alone
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

// learn keeps s, read by an acquisition, once past the first seconds of
// the boot conn's first session read found.
func (p pinned) learn(s session) {
	if p.sock == nil {
		return
	}
	if b := p.sock.boot.Load(); b > 0 && s.at > b+2*bootSlack {
		s.boot = b
		p.sock.sess.Store(&s)
	}
}
