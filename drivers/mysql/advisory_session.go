package mysql

import (
	"context"
	"database/sql"
)

// A restarted server hands out connection ids from 1 again: IS_USED_LOCK
// may name a dead holder's id, now another client's. So a lock's session
// is its CONNECTION_ID() and the server's clock when taken, and a probe
// also reads the boot time: a lock taken before it is lost, whatever the
// id. The own pool reads the session once per connection, with the boot
// time, and keeps it with the socket; in the boot's first seconds, and on
// NewWithDB's pool, each acquisition reads it in its statement. As
// advisory locks themselves, this assumes one server session per client
// connection for life (not so behind a proxy that moves it).

// takenSQL is the server's clock in seconds: UNIX_TIMESTAMP() converts no
// time zone (NOW() is ambiguous when the clock goes back).
const takenSQL = "UNIX_TIMESTAMP()"

// bootSQL are the expressions of the server's boot time in seconds, tried
// in order: MariaDB's, MySQL's, none (NULL).
var bootSQL = []string{
	uptimeSQL("information_schema.GLOBAL_STATUS"),
	uptimeSQL("performance_schema.global_status"),
	"NULL",
}

func uptimeSQL(table string) string {
	return "CAST(UNIX_TIMESTAMP() - (SELECT VARIABLE_VALUE FROM " + table + " WHERE VARIABLE_NAME = 'Uptime') AS SIGNED)"
}

// bootSlack is how many seconds after the boot time a lock must have been
// taken to count as after it: the boot time may be off by one, and a
// restart must never be missed (a lock taken in the first seconds is lost).
const bootSlack = 1

// session is a connection's CONNECTION_ID(), the clock (takenSQL) then,
// the boot time read with it (0: not read), its wait_timeout in s.
type session struct{ conn, at, boot, wait int64 }

// sessionSQL reads a connection's session (without the boot time).
const sessionSQL = "CONNECTION_ID(), " + takenSQL + ", @@wait_timeout"

// Values of socket.boot besides a boot time.
const (
	bootUnread  = 0  // the session was never read
	bootNoCache = -1 // the server refused to tell: each acquisition reads it
)

// queryBoot scans the row of q(boot-time expression) on the pool (withBoot).
func (a *advisoryDriver) queryBoot(ctx context.Context, q func(boot string) string, args []any, dest ...any) error {
	return a.withBoot(func(boot string) error {
		return a.db.QueryRowContext(ctx, q(boot), args...).Scan(dest...)
	})
}

// withBoot runs run with the boot-time expression in use; one the server
// lacks (noBootSource) is left for the next, for good, and run runs again.
func (a *advisoryDriver) withBoot(run func(boot string) error) error {
	for {
		src := a.bootSrc.Load()
		err := run(a.bootSQL[src])
		if int(src) < len(a.bootSQL)-1 && noBootSource(err) {
			a.bootSrc.CompareAndSwap(src, src+1)
			continue
		}
		return err
	}
}

// holds reports whether h is held by its own session, from one statement's
// IS_USED_LOCK id and boot time (NULL: the id alone counts): not if h was
// taken before the boot (bootSlack), nor if the boot time differs from the
// first seen while h was held (a fail-over).
func (h *heldLock) holds(id, boot sql.NullInt64) bool {
	if !id.Valid || id.Int64 != h.connID {
		return false
	}
	if !boot.Valid {
		return true
	}
	b := boot.Int64
	if h.takenAt <= b+bootSlack {
		return false
	}
	if h.boot.CompareAndSwap(0, b) {
		return true
	}
	seen := h.boot.Load()
	return b >= seen-bootSlack && b <= seen+bootSlack
}

// session returns conn's session, reading it with the boot time if never
// asked; ok is false when the acquisition must read it (learn).
func (a *advisoryDriver) session(ctx context.Context, conn pinned) (s session, ok bool, err error) {
	sock := conn.Sock
	if sock == nil {
		return session{}, false, nil
	}
	if p := sock.State.sess.Load(); p != nil {
		return *p, true, nil
	}
	if sock.State.boot.Load() != bootUnread {
		return session{}, false, nil // made in the server's first seconds, or not to be kept
	}
	var boot sql.NullInt64
	err = a.withBoot(func(bootSQL string) error {
		return conn.QueryRow(ctx, "SELECT "+sessionSQL+", "+bootSQL, nil, &s.conn, &s.at, &s.wait, &boot)
	})
	switch {
	case errNumber(err) != 0:
		sock.State.boot.Store(bootNoCache)
		return session{}, false, nil
	case err != nil:
		return session{}, false, err
	case boot.Valid && s.at <= boot.Int64+2*bootSlack: // the boot's first seconds
		sock.State.boot.Store(max(boot.Int64, 1))
		return session{}, false, nil
	}
	s.boot = boot.Int64 // NULL: 0, probes compare ids alone
	sock.State.sess.Store(&s)
	return s, true, nil
}

// learn keeps s, read by an acquisition, once past the first seconds
// after the boot that conn's first session read found.
func learn(p pinned, s session) {
	if p.Sock == nil {
		return
	}
	if b := p.Sock.State.boot.Load(); b > 0 && s.at > b+2*bootSlack {
		s.boot = b
		p.Sock.State.sess.Store(&s)
	}
}
