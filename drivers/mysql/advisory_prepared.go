package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"

	gomysql "github.com/go-sql-driver/mysql"
)

// The advisory acquire statement (sequence and uuid_short fences, on a
// connection whose session is kept: advisory_session.go) and the release statement
// run, on the driver's own pool, as server-side prepared statements kept
// for the life of each connection (with its socket): prepared at a
// connection's first use of each, then one execute round trip each time.
// The server then parses nothing, and MariaDB, which caches a prepared
// statement's result metadata for a client that says it can (go-sql-driver
// does), sends no column definitions either. Measured on MariaDB 10.11
// here, an advisory acquire+release costs 0.99–1.02 × a bare text
// GET_LOCK + RELEASE_LOCK pair this way, against 1.17–1.21 × with the same
// statements sent as text with interpolated arguments. Without kept
// statements a prepared statement costs two round trips and a close
// (prepare, execute, close), which is why go-sql-driver interpolates
// arguments instead.
//
// Each connection keeps at most one statement per statement text the
// driver runs this way (acquire with and without a timeout, release): up
// to three, freed by the server with the connection, and counted against
// the server-wide max_prepared_stmt_count (16382 by default). A connection
// whose prepare the server refuses for good (that limit reached, error
// 1461; or a server or proxy without prepared statements, 1295, 1047)
// sends them as text from then on; after another refusal, that call sends
// its statement as text and the next prepares again. A missing fence
// sequence fails the call, and the next creates it again. With a pool
// given to NewWithDB (sockets unknown) they are sent as text.

// errNoPrepare makes queryUint run its statement as text.
var errNoPrepare = errors.New("mysql: statement not prepared")

// queryUint runs q, whose one row has one non-negative integer column, on
// p's connection and returns that value (valid false: NULL).
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

// execute runs q as a statement kept prepared on the connection dc (the
// socket's), preparing it at its first use. A statement the server no
// longer knows (error 1243: its session was reset under the driver) is
// prepared once more; nothing ran.
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
		var me *gomysql.MySQLError
		if attempt == 0 && errors.As(err, &me) && me.Number == 1243 {
			delete(s.stmts, q)
			continue
		}
		return v, valid, err
	}
}

// prepared returns q's statement kept on the connection dc, preparing it
// if need be; errNoPrepare when it is to run as text.
func (s *socket) prepared(ctx context.Context, dc any, q string) (driver.StmtQueryContext, error) {
	if st := s.stmts[q]; st != nil {
		return st.(driver.StmtQueryContext), nil
	}
	pc, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		s.noPrepare = true
		return nil, errNoPrepare
	}
	st, err := pc.PrepareContext(ctx, q)
	var me *gomysql.MySQLError
	switch {
	case err == nil:
	case missingTable(err) || !errors.As(err, &me):
		// The fence sequence was dropped (the acquisition's error makes
		// the driver create it again), or the connection failed.
		return nil, err
	case me.Number == 1461 || me.Number == 1295 || me.Number == 1047:
		// Too many prepared statements on the server, a statement that
		// cannot be prepared, a server (proxy) without prepared
		// statements: text from now on.
		s.noPrepare = true
		return nil, errNoPrepare
	default:
		return nil, errNoPrepare // this time as text; prepared again next time
	}
	sq, ok := st.(driver.StmtQueryContext)
	if !ok {
		_ = st.Close()
		s.noPrepare = true
		return nil, errNoPrepare
	}
	if s.stmts == nil {
		s.stmts = map[string]driver.Stmt{}
	}
	s.stmts[q] = st
	return sq, nil
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
	switch {
	case errors.Is(err, io.EOF):
		return 0, false, sql.ErrNoRows
	case err != nil:
		return 0, false, err
	case len(vals) != 1:
		return 0, false, fmt.Errorf("mysql: %d columns, want 1", len(vals))
	}
	return uintValue(vals[0])
}

// uintValue converts a column value of the binary protocol to uint64.
func uintValue(v driver.Value) (uint64, bool, error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case int64:
		if x >= 0 {
			return uint64(x), true, nil
		}
	case uint64:
		return x, true, nil
	case []byte: // an unsigned BIGINT above MaxInt64
		n, err := strconv.ParseUint(string(x), 10, 64)
		return n, err == nil, err
	}
	return 0, false, fmt.Errorf("mysql: unexpected value %T %v", v, v)
}
