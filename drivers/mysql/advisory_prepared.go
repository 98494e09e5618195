package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// On the own pool, the advisory acquire statement (sequence and uuid_short
// fences, session known) and the release run as server-side prepared
// statements kept with each connection's socket: one execute round trip,
// nothing parsed, and no column definitions from MariaDB (metadata cache).
// On MariaDB 10.11 an acquire+release pair so costs 0.99–1.02 × a bare text
// GET_LOCK + RELEASE_LOCK pair, against 1.17–1.21 × as interpolated text.
// A connection keeps up to three (acquire with and without timeout,
// release), counted against max_prepared_stmt_count. One whose prepare is
// refused for good (1461: that limit; 1295, 1047: no prepared statements)
// sends text from then on; after another refusal only that call does.

// errNoPrepare makes queryUint run its statement as text.
var errNoPrepare = errors.New("mysql: statement not prepared")

// queryUint runs q, one row of one non-negative integer, on p's connection
// and returns it (valid false: NULL).
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

// prepared returns q's statement kept on dc, go-sql-driver's connection,
// preparing it if need be; errNoPrepare when it is to run as text.
func (s *socket) prepared(ctx context.Context, dc any, q string) (driver.StmtQueryContext, error) {
	if st := s.stmts[q]; st != nil {
		return st.(driver.StmtQueryContext), nil
	}
	st, err := dc.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	switch n := errNumber(err); {
	case err == nil:
	case missingTable(err) || n == 0: // the sequence is created again; or the connection failed
		return nil, err
	case n == 1461 || n == 1295 || n == 1047: // refused for good
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

// uintValue converts a column value of the binary protocol to uint64.
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
