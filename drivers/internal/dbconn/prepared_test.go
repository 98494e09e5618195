package dbconn

import (
	"context"
	"database/sql/driver"
	"reflect"
	"testing"
)

// counters reads p's session's statement counters.
func counters(ctx context.Context, t *testing.T, p Pinned[state]) (prepare, execute int64) {
	t.Helper()
	for name, dst := range map[string]*int64{"Com_stmt_prepare": &prepare, "Com_stmt_execute": &execute} {
		var n string
		if err := p.Conn.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE ?", name).Scan(&n, dst); err != nil {
			t.Fatal(err)
		}
	}
	return prepare, execute
}

// TestQueryUintPrepared: with its socket known, QueryUint prepares a
// statement once and then only executes it (the session's own counters
// say so), NULL not valid; a statement the server forgot (Policy.Forgotten)
// is prepared again; without a socket it runs as text.
func TestQueryUintPrepared(t *testing.T) {
	ctx, db, socks := openPool(t, mysqlPolicy)
	p, err := socks.Pin(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Conn.Close()
	const q = "SELECT ? + 1"
	query := func(p Pinned[state], in uint64) {
		t.Helper()
		if v, valid, err := p.QueryUint(ctx, q, []any{in}); err != nil || !valid || v != in+1 {
			t.Fatalf("QueryUint = %d, %v, %v; want %d", v, valid, err, in+1)
		}
	}
	p0, e0 := counters(ctx, t, p)
	for i := range uint64(3) {
		query(p, i)
	}
	if v, valid, err := p.QueryUint(ctx, "SELECT NULL", nil); err != nil || valid || v != 0 {
		t.Fatalf("QueryUint(NULL) = %d, %v, %v; want not valid", v, valid, err)
	}
	p1, e1 := counters(ctx, t, p)
	if p1-p0 != 2 || e1-e0 != 4 || len(p.Sock.Stmts()) != 2 || p.Sock.TextOnly() {
		t.Fatalf("%d prepared, %d executed, %d kept, text only %v; want 2, 4, 2, false", p1-p0, e1-e0, len(p.Sock.Stmts()), p.Sock.TextOnly())
	}
	// Close the server's statement behind the kept one's back (a copy of
	// it closes, the kept one stays): the server forgot it.
	kept := p.Sock.Stmts()[q]
	err = p.Conn.Raw(func(any) error {
		dup := reflect.New(reflect.TypeOf(kept).Elem())
		dup.Elem().Set(reflect.ValueOf(kept).Elem())
		return dup.Interface().(driver.Stmt).Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	query(p, 41)
	if again := p.Sock.Stmts()[q]; again == nil || again == kept || p.Sock.TextOnly() {
		t.Fatalf("statement kept %v, the same %v, text only %v; want prepared again", again != nil, again == kept, p.Sock.TextOnly())
	}
	p2, e2 := counters(ctx, t, p)
	if p2-p1 != 1 {
		t.Fatalf("%d prepared after the server forgot it; want 1", p2-p1)
	}
	// Without a known socket: as text.
	query(Pinned[state]{Conn: p.Conn}, 7)
	if p3, e3 := counters(ctx, t, p); p3 != p2 || e3 != e2 {
		t.Fatalf("without a socket: %d more prepared, %d more executed; want none", p3-p2, e3-e2)
	}
}

// TestQueryUintRefused: a prepare the server refuses runs the statement
// as text, and every one after it too when the policy says so (Never),
// else only that time (Text).
func TestQueryUintRefused(t *testing.T) {
	for _, r := range []Refusal{Text, Never} {
		t.Run(map[Refusal]string{Text: "text", Never: "never"}[r], func(t *testing.T) {
			refused := Policy{Forgotten: mysqlPolicy.Forgotten, Refused: func(error) Refusal { return r }}
			ctx, db, socks := openPool(t, refused)
			p, err := socks.Pin(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Conn.Close()
			// No table: the prepare fails, and the statement as text too.
			if _, _, err := p.QueryUint(ctx, "SELECT COUNT(*) FROM mutexfx_dbconn_missing", nil); errNum(err) != 1146 {
				t.Fatalf("QueryUint on a missing table: %v; want error 1146", err)
			}
			if _, _, err := p.QueryUint(ctx, "SELECT 1", nil); err != nil {
				t.Fatal(err)
			}
			if want := r == Never; p.Sock.TextOnly() != want || (len(p.Sock.Stmts()) == 0) != want {
				t.Fatalf("text only %v, %d kept; want text only %v", p.Sock.TextOnly(), len(p.Sock.Stmts()), want)
			}
		})
	}
}

// TestUintValue: the binary protocol's values of a one-column result.
func TestUintValue(t *testing.T) {
	for _, tc := range []struct {
		in    driver.Value
		v     uint64
		valid bool
		err   bool
	}{
		{nil, 0, false, false},
		{int64(0), 0, true, false},
		{int64(42), 42, true, false},
		{int64(-1), 0, false, true},
		{[]byte("18446744073709551615"), 1<<64 - 1, true, false},
		{[]byte("x"), 0, false, true},
		{"42", 0, false, true},
	} {
		v, valid, err := uintValue(tc.in)
		if v != tc.v || valid != tc.valid || (err != nil) != tc.err {
			t.Errorf("uintValue(%#v) = %d, %v, %v; want %d, %v, error %v", tc.in, v, valid, err, tc.v, tc.valid, tc.err)
		}
	}
}
