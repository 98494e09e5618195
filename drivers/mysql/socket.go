package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/drivers/internal/hangup"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// Statements on pinned connections run with a context that cannot be
// cancelled, and the caller's ends by closing the socket: go-sql-driver's
// watcher of a cancellable context costs two goroutine wake-ups per
// statement (20–25 µs on loopback, a sixth of an advisory acquire+release
// pair), and closes the socket too. Sockets are known only on the own
// pool; elsewhere statements take the caller's context.

// sockets maps the own pool's connections to their sockets.
type sockets struct {
	mu sync.Mutex
	m  map[driver.Conn]*socket

	conns sqlkit.Conns   // every open socket: Close cuts them
	hup   hangup.Watcher // tells when sockets holding locks hang up
}

// socket is a connection's network connection.
type socket struct {
	*sqlkit.Conn
	owner *sockets
	key   driver.Conn // set once the connection is made

	sess atomic.Pointer[session] // the session, once known (advisory_session.go)
	boot atomic.Int64            // bootUnread, bootNoCache, or the boot time of a session read in its first seconds

	// the connection's holder's, one at a time:
	stmts     map[string]driver.Stmt // kept prepared (execute)
	noPrepare bool                   // prepares refused: run as text
	ident     string                 // identity last written (advisory_fence.go)

	hup hangup.Conn // watched by owner.hup
}

// Close closes the socket and forgets it.
func (s *socket) Close() error {
	s.owner.mu.Lock()
	if s.key != nil && s.owner.m[s.key] == s {
		delete(s.owner.m, s.key)
	}
	s.owner.mu.Unlock()
	s.hup.Forget()
	return s.Conn.Close()
}

// cut closes the socket under a running statement: it fails at once.
func (s *socket) cut() {
	s.hup.Forget()
	_ = s.Conn.Close()
}

// dialSlotKey keys the *(*socket) through which dial hands Connect its socket.
type dialSlotKey struct{}

// connector makes cfg's connections, recording their sockets, or is cfg's
// own for a network a plain net.Dialer cannot dial.
func (s *sockets) connector(cfg *gomysql.Config) (driver.Connector, error) {
	if slices.Contains([]string{"tcp", "tcp4", "tcp6", "unix"}, cfg.Net) {
		cfg.DialFunc = s.dial
		inner, err := gomysql.NewConnector(cfg)
		if err != nil {
			return nil, err
		}
		s.m = map[driver.Conn]*socket{}
		return &connector{inner: inner, s: s}, nil
	}
	return gomysql.NewConnector(cfg)
}

func (s *sockets) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	sock := &socket{owner: s}
	sock.hup.Watch(&s.hup, sock)
	c, err := s.conns.Dial(ctx, d.DialContext, network, addr, sock.hup.Forget)
	if err != nil {
		return nil, err
	}
	sock.Conn = c
	if slot, ok := ctx.Value(dialSlotKey{}).(**socket); ok {
		*slot = sock
	}
	return sock, nil
}

// of returns conn's socket, or nil when it is not known.
func (s *sockets) of(conn *sql.Conn) *socket {
	if s == nil {
		return nil
	}
	var sock *socket
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

// connector wraps go-sql-driver's to learn each connection's socket.
type connector struct {
	inner driver.Connector
	s     *sockets
}

var _ syscall.Conn = (*socket)(nil) // go-sql-driver's liveness check needs it

// Connect makes a connection and records its socket.
func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	var sock *socket
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

// Driver returns go-sql-driver's driver.
func (c *connector) Driver() driver.Driver { return c.inner.Driver() }

// pinned is a connection the driver pinned and its socket (nil: unknown).
type pinned struct {
	conn *sql.Conn
	sock *socket
}

// armHangup has fn called when the server closes or resets p's connection
// (without a socket the probes find out).
func (p pinned) armHangup(fn func()) {
	if p.sock != nil {
		p.sock.hup.Arm(fn)
	}
}

// disarmHangup undoes armHangup: p's connection holds no lock now.
func (p pinned) disarmHangup() {
	if p.sock != nil {
		p.sock.hup.Disarm()
	}
}

// queryRow runs q on p's connection (run) and scans its row into dest.
func (p pinned) queryRow(ctx context.Context, q string, args []any, dest ...any) error {
	return p.run(ctx, func(ctx context.Context) error {
		return p.conn.QueryRowContext(ctx, q, args...).Scan(dest...)
	})
}

// exec runs q on p's connection (run).
func (p pinned) exec(ctx context.Context, q string, args []any) (res sql.Result, err error) {
	err = p.run(ctx, func(ctx context.Context) error {
		res, err = p.conn.ExecContext(ctx, q, args...)
		return err
	})
	return res, err
}

// run runs f, a statement on p's connection, with ctx, or with a context
// that cannot be cancelled while ctx's end closes the socket (the error
// then wraps ctx's cause).
func (p pinned) run(ctx context.Context, f func(context.Context) error) error {
	if p.sock == nil || ctx.Done() == nil {
		return f(ctx)
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	stop := context.AfterFunc(ctx, p.sock.cut)
	err := f(context.WithoutCancel(ctx))
	if !stop() {
		return fmt.Errorf("%w (statement: %v)", context.Cause(ctx), err)
	}
	return err
}

// exec runs q on the pool; with a cancellable ctx on the own pool, on a
// connection taken for it (run), retried as database/sql does when the
// statement was not sent (driver.ErrBadConn).
func (c *core) exec(ctx context.Context, q string, args []any) (sql.Result, error) {
	if c.socks == nil || ctx.Done() == nil {
		return c.db.ExecContext(ctx, q, args...)
	}
	for attempt := 0; ; attempt++ {
		conn, err := c.db.Conn(ctx)
		if err != nil {
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			return nil, err
		}
		res, err := pinned{conn, c.socks.of(conn)}.exec(ctx, q, args)
		if ctx.Err() != nil {
			discard(conn) // its socket may be closed under it
		} else {
			conn.Close()
		}
		if attempt < 2 && errors.Is(err, driver.ErrBadConn) && ctx.Err() == nil {
			continue
		}
		return res, err
	}
}

// On the own pool, the advisory acquire statement (sequence and uuid_short
// fences, session known) and the release run as server-side prepared
// statements kept with each connection's socket: one execute round trip,
// nothing parsed, no column definitions from MariaDB (metadata cache). On
// MariaDB 10.11 an acquire+release pair so costs 0.99–1.02 × a bare text
// GET_LOCK + RELEASE_LOCK pair, against 1.17–1.21 × as interpolated text.
// A connection keeps up to three, counted against max_prepared_stmt_count.

// errNoPrepare makes queryUint run its statement as text.
var errNoPrepare = errors.New("mysql: statement not prepared")

// queryUint runs q, one row of one non-negative integer, on p's connection
// (valid false: NULL).
func (p pinned) queryUint(ctx context.Context, q string, args []any) (v uint64, valid bool, err error) {
	if p.sock != nil && !p.sock.noPrepare {
		err = p.run(ctx, func(ctx context.Context) error {
			return p.conn.Raw(func(dc any) error {
				v, valid, err = p.sock.execute(ctx, dc, q, args)
				return err
			})
		})
		if !errors.Is(err, errNoPrepare) {
			return v, valid, err
		}
	}
	var n sql.Null[uint64]
	err = p.queryRow(ctx, q, args, &n)
	return n.V, n.Valid, err
}

// execute runs q kept prepared on dc, the socket's connection, preparing
// it at first use, and again if the server forgot it (1243: session reset;
// nothing ran).
func (s *socket) execute(ctx context.Context, dc any, q string, args []any) (uint64, bool, error) {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return 0, false, err
		}
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	for attempt := 0; ; attempt++ {
		st, err := s.prepared(ctx, dc, q)
		if err != nil {
			return 0, false, err
		}
		v, valid, err := queryOne(ctx, st, nv)
		if attempt == 0 && errNumber(err) == 1243 {
			delete(s.stmts, q)
			continue
		}
		return v, valid, err
	}
}

// prepared returns q's statement kept on dc, preparing it if need be;
// errNoPrepare when it is to run as text: for good once the server refused
// for good (1461: max_prepared_stmt_count; 1295, 1047: no prepared
// statements), else for this call.
func (s *socket) prepared(ctx context.Context, dc any, q string) (driver.StmtQueryContext, error) {
	if st := s.stmts[q]; st != nil {
		return st.(driver.StmtQueryContext), nil
	}
	st, err := dc.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	switch n := errNumber(err); {
	case err == nil:
	case missingTable(err) || n == 0: // the sequence is created again; or the connection failed
		return nil, err
	case n == 1461 || n == 1295 || n == 1047:
		s.noPrepare = true
		return nil, errNoPrepare
	default:
		return nil, errNoPrepare // this time as text
	}
	if s.stmts == nil {
		s.stmts = map[string]driver.Stmt{}
	}
	s.stmts[q] = st
	return st.(driver.StmtQueryContext), nil
}

// queryOne runs st with nv and returns its one row's one value.
func queryOne(ctx context.Context, st driver.StmtQueryContext, nv []driver.NamedValue) (uint64, bool, error) {
	rows, err := st.QueryContext(ctx, nv)
	if err != nil {
		return 0, false, err
	}
	vals := make([]driver.Value, len(rows.Columns()))
	err = rows.Next(vals)
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, io.EOF) {
		return 0, false, sql.ErrNoRows
	} else if err != nil {
		return 0, false, err
	}
	return uintValue(vals[0])
}

// uintValue converts a binary-protocol column value to uint64.
func uintValue(v driver.Value) (uint64, bool, error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case int64:
		if x >= 0 {
			return uint64(x), true, nil
		}
	case []byte: // an unsigned BIGINT above MaxInt64
		n, err := strconv.ParseUint(string(x), 10, 64)
		return n, err == nil, err
	}
	return 0, false, fmt.Errorf("mysql: unexpected value %T %v", v, v)
}
