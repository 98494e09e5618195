package dbconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// A pinned connection with a known socket runs QueryUint's statements as
// server-side prepared statements kept with the socket: one execute round
// trip, nothing parsed again. Each kept statement counts against the
// server's limit on prepared statements.

// Policy is what a store's errors mean to kept prepared statements.
type Policy struct {
	// Forgotten reports that the server forgot the statement (nothing
	// ran): it is prepared again, once.
	Forgotten func(err error) bool
	// Refused says what a failed prepare means.
	Refused func(err error) Refusal
}

// Refusal is what a failed prepare means.
type Refusal int

const (
	// Fail fails the statement with the error.
	Fail Refusal = iota
	// Text runs the statement as text, this time.
	Text
	// Never runs it as text, and every statement on the socket from now on.
	Never
)

// errNoPrepare makes QueryUint run its statement as text.
var errNoPrepare = errors.New("dbconn: statement not prepared")

// QueryUint runs q, one row of one non-negative integer, on p's
// connection, kept prepared when the socket is known (valid false: NULL).
func (p Pinned[T]) QueryUint(ctx context.Context, q string, args []any) (v uint64, valid bool, err error) {
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
// it at first use, and again if the server forgot it.
func (s *Socket[T]) execute(ctx context.Context, dc any, q string, args []any) (uint64, bool, error) {
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
		if attempt == 0 && err != nil && s.owner.Policy.Forgotten(err) {
			delete(s.stmts, q)
			continue
		}
		return v, valid, err
	}
}

// prepared returns q's statement kept on dc, preparing it if need be;
// errNoPrepare when it is to run as text (Policy.Refused).
func (s *Socket[T]) prepared(ctx context.Context, dc any, q string) (driver.StmtQueryContext, error) {
	if st := s.stmts[q]; st != nil {
		return st.(driver.StmtQueryContext), nil
	}
	st, err := dc.(driver.ConnPrepareContext).PrepareContext(ctx, q)
	if err != nil {
		switch s.owner.Policy.Refused(err) {
		case Never:
			s.noPrepare = true
			return nil, errNoPrepare
		case Text:
			return nil, errNoPrepare
		default:
			return nil, err
		}
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
	return 0, false, fmt.Errorf("dbconn: unexpected value %T %v", v, v)
}
