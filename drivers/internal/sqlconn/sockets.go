// Package sqlconn gives a database/sql driver what its locks need of the
// connections of its own pool: each connection's socket, to cut it when a
// statement's ctx ends and to hear when the server hangs up; statements kept
// prepared on it; a few connections kept between acquisitions. A store
// package supplies its connector, its error numbers (Errors) and S, the
// state it keeps per connection.
package sqlconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"net"
	"sync"
	"syscall"

	"github.com/mutexfx/mutexfx/drivers/internal/hangup"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// Sockets are the sockets of a pool's connections, by connection.
type Sockets[S any] struct {
	errs Errors

	mu sync.Mutex
	m  map[driver.Conn]*Socket[S]

	conns sqlkit.Conns   // every open socket: Cut closes them
	hup   hangup.Watcher // tells when sockets holding locks hang up
}

// Errors tell how a store's errors bear on kept prepared statements.
type Errors struct {
	// Forgotten reports an execute error meaning the server no longer
	// knows the statement and ran nothing (a session reset): it is
	// prepared again, once.
	Forgotten func(error) bool
	// Refused sorts a prepare error: run the statement as text this time
	// (text), or for good on this connection (never); else the error is
	// the statement's.
	Refused func(error) (text, never bool)
}

// DialFunc dials a connection's socket.
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// New returns an empty set of sockets whose prepared statements errs steers.
func New[S any](errs Errors) *Sockets[S] {
	return &Sockets[S]{errs: errs, m: map[driver.Conn]*Socket[S]{}}
}

// dialSlotKey keys the *(*Socket) through which dial hands Connect its socket.
type dialSlotKey struct{}

// Connector returns a connector that records the sockets of the
// connections of the one newConnector makes with dial as its dial
// function (a plain net.Dialer's, recorded).
func (s *Sockets[S]) Connector(newConnector func(dial DialFunc) (driver.Connector, error)) (driver.Connector, error) {
	inner, err := newConnector(s.dial)
	if err != nil {
		return nil, err
	}
	return &connector[S]{inner: inner, s: s}, nil
}

func (s *Sockets[S]) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	sock := &Socket[S]{owner: s}
	sock.hup.Watch(&s.hup, sock)
	c, err := s.conns.Dial(ctx, d.DialContext, network, addr, sock.hup.Forget)
	if err != nil {
		return nil, err
	}
	sock.Conn = c
	if slot, ok := ctx.Value(dialSlotKey{}).(**Socket[S]); ok {
		*slot = sock
	}
	return sock, nil
}

// Of returns conn's socket, or nil when it is not known (s nil too).
func (s *Sockets[S]) Of(conn *sql.Conn) *Socket[S] {
	if s == nil {
		return nil
	}
	var sock *Socket[S]
	_ = conn.Raw(func(dc any) error {
		if k, ok := dc.(driver.Conn); ok {
			s.mu.Lock()
			sock = s.m[k]
			s.mu.Unlock()
		}
		return nil
	})
	return sock
}

// Len is how many sockets are open.
func (s *Sockets[S]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// Cut closes every socket, under whatever statement runs on it, and makes
// later dials fail with drivers.ErrClosed.
func (s *Sockets[S]) Cut() { s.conns.Cut() }

// Close stops the hang-up watch.
func (s *Sockets[S]) Close() { s.hup.Close() }

// connector wraps a connector to learn each connection's socket.
type connector[S any] struct {
	inner driver.Connector
	s     *Sockets[S]
}

// Connect makes a connection and records its socket.
func (c *connector[S]) Connect(ctx context.Context) (driver.Conn, error) {
	var sock *Socket[S]
	dc, err := c.inner.Connect(context.WithValue(ctx, dialSlotKey{}, &sock))
	if err != nil {
		return nil, err
	}
	if sock != nil {
		c.s.mu.Lock()
		sock.key = dc
		c.s.m[dc] = sock
		c.s.mu.Unlock()
	}
	return dc, nil
}

// Driver returns the inner connector's driver.
func (c *connector[S]) Driver() driver.Driver { return c.inner.Driver() }

// Socket is a connection's network connection.
type Socket[S any] struct {
	*sqlkit.Conn
	owner *Sockets[S]
	key   driver.Conn // set once the connection is made

	// State is the store's, for the connection's life.
	State S

	// the connection's holder's, one at a time:
	stmts     map[string]driver.Stmt // kept prepared (execute)
	noPrepare bool                   // prepares refused: run as text

	hup hangup.Conn // watched by owner.hup
}

var _ syscall.Conn = (*Socket[struct{}])(nil) // go-sql-driver's liveness check needs it

// Close closes the socket and forgets it.
func (s *Socket[S]) Close() error {
	s.owner.mu.Lock()
	if s.key != nil && s.owner.m[s.key] == s {
		delete(s.owner.m, s.key)
	}
	s.owner.mu.Unlock()
	s.hup.Forget()
	return s.Conn.Close()
}

// cut closes the socket under a running statement: it fails at once.
func (s *Socket[S]) cut() {
	s.hup.Forget()
	_ = s.Conn.Close()
}

// Kept returns the statements the connection keeps prepared, by text, and
// whether it runs them as text for good; for its holder to read.
func (s *Socket[S]) Kept() (stmts map[string]driver.Stmt, textOnly bool) { return s.stmts, s.noPrepare }
