package dbconn

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

// Sockets maps a pool's connections to their sockets; T is the state a
// driver keeps with each connection (Socket.State). A nil *Sockets knows
// no socket. Set Policy before the first connection.
type Sockets[T any] struct {
	Policy Policy         // what the store's errors mean to prepared statements
	Conns  sqlkit.Conns   // every open socket: cutting them fails their statements
	Hup    hangup.Watcher // tells when sockets holding locks hang up

	mu sync.Mutex
	m  map[driver.Conn]*Socket[T]
}

// Socket is a connection's network connection, with the driver's state
// for it. Its statements and State are its connection's user's, one at a
// time.
type Socket[T any] struct {
	*sqlkit.Conn
	State T // the driver's own, per connection

	owner *Sockets[T]
	key   driver.Conn // set once the connection is made

	stmts     map[string]driver.Stmt // kept prepared (prepared.go)
	noPrepare bool                   // prepares refused for good: run as text

	hup hangup.Conn // watched by owner.Hup
}

var _ syscall.Conn = (*Socket[struct{}])(nil) // database/sql drivers' liveness checks need it

// Close closes the socket and forgets it.
func (s *Socket[T]) Close() error {
	s.owner.mu.Lock()
	if s.key != nil && s.owner.m[s.key] == s {
		delete(s.owner.m, s.key)
	}
	s.owner.mu.Unlock()
	s.hup.Forget()
	return s.Conn.Close()
}

// cut closes the socket under a running statement: it fails at once.
func (s *Socket[T]) cut() {
	s.hup.Forget()
	_ = s.Conn.Close()
}

// Stmts returns the statements kept prepared on the socket, by query.
func (s *Socket[T]) Stmts() map[string]driver.Stmt { return s.stmts }

// TextOnly reports whether the server refused to prepare for good: the
// statements run as text.
func (s *Socket[T]) TextOnly() bool { return s.noPrepare }

// Dialer dials a socket; a database/sql driver's connector calls it.
type Dialer = func(ctx context.Context, network, addr string) (net.Conn, error)

// Connector returns a connector that records the sockets of the
// connections that newInner's connector makes with the given dialer.
func (s *Sockets[T]) Connector(newInner func(dial Dialer) (driver.Connector, error)) (driver.Connector, error) {
	inner, err := newInner(s.dial)
	if err != nil {
		return nil, err
	}
	s.m = map[driver.Conn]*Socket[T]{}
	return &connector[T]{inner: inner, s: s}, nil
}

// dialSlotKey keys the **Socket through which dial hands Connect its socket.
type dialSlotKey struct{}

func (s *Sockets[T]) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	sock := &Socket[T]{owner: s}
	sock.hup.Watch(&s.Hup, sock)
	c, err := s.Conns.Dial(ctx, d.DialContext, network, addr, sock.hup.Forget)
	if err != nil {
		return nil, err
	}
	sock.Conn = c
	if slot, ok := ctx.Value(dialSlotKey{}).(**Socket[T]); ok {
		*slot = sock
	}
	return sock, nil
}

// Len returns how many sockets are open.
func (s *Sockets[T]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// Of returns conn's socket, or nil when it is not known.
func (s *Sockets[T]) Of(conn *sql.Conn) *Socket[T] {
	if s == nil {
		return nil
	}
	var sock *Socket[T]
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

// connector wraps a driver's connector to learn each connection's socket.
type connector[T any] struct {
	inner driver.Connector
	s     *Sockets[T]
}

// Connect makes a connection and records its socket.
func (c *connector[T]) Connect(ctx context.Context) (driver.Conn, error) {
	var sock *Socket[T]
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
func (c *connector[T]) Driver() driver.Driver { return c.inner.Driver() }
