package sqlconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// On the own pool, a driver's hottest statements can run as server-side
// prepared statements kept with each connection's socket: one execute
// round trip, nothing parsed, no column definitions (MariaDB's metadata
// cache).

// errNoPrepare makes QueryUint run its statement as text.
var errNoPrepare = errors.New("sqlconn: statement not prepared")

// QueryUint runs q, one row of one non-negative integer, on p's
// connection, kept prepared when its socket is known (valid false: NULL).
func (p Pinned[S]) QueryUint(ctx context.Context, q string, args []any) (v uint64, valid bool, err error) {
	if p.Sock != nil && !p.Sock.noPrepare {
		err = p.Run(ctx, func(ctx context.Context) error {
			return p.Conn.Raw(func(dc any) error {
				v, valid, err = p.Sock.execute(ctx, dc, q, args)
				return err
			})
		})
		if !errors.Is(err, errNoPrepare) {
			return v, valid, err
		}
	}
	var n sql.Null[uint64]
	err = p.QueryRow(ctx, q, args, &n)
	return n.V, n.Valid, err
}

// execute runs q kept prepared on dc, the socket's connection, preparing
// it at first use, and again, once, if the server forgot it.
func (s *Socket[S]) execute(ctx context.Context, dc any, q string, args []any) (uint64, bool, error) {
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
		if attempt == 0 && err != nil && s.owner.errs.Forgotten(err) {
			delete(s.stmts, q)
			continue
		}
		return v, valid, err
	}
}

// prepared returns q's statement kept on dc, preparing it if need be;
// errNoPrepare when it is to run as text (Errors.Refused).
func (s *Socket[S]) prepared(ctx context.Context, dc any, q string) (driver.StmtQueryContext, error) {
	if st := s.stmts[q]; st != nil {
		return st.(driver.StmtQueryContext), nil
	}
	st, err := dc.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	if err != nil {
		text, never := s.owner.errs.Refused(err)
		if !text {
			return nil, err
		}
		if never {
			s.noPrepare = true
		}
		return nil, errNoPrepare
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
	return 0, false, fmt.Errorf("unexpected value %T %v", v, v)
}
