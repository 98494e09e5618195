package sqlconn

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"maps"
	"reflect"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// testErrors is MySQL's reading of prepare errors, as drivers/mysql's.
var testErrors = Errors{
	Forgotten: func(err error) bool { return number(err) == 1243 },
	Refused:   func(err error) (bool, bool) { return number(err) != 0, number(err) == 1461 },
}

func number(err error) uint16 {
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// open returns a pool on the shared MariaDB whose sockets s records; both
// end with the test.
func open(t *testing.T) (*Sockets[int], *sql.DB) {
	t.Helper()
	cfg, err := gomysql.ParseDSN(testutil.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	s := New[int](testErrors)
	c, err := s.Connector(func(dial DialFunc) (driver.Connector, error) {
		cfg.DialFunc = dial
		return gomysql.NewConnector(cfg)
	})
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	t.Cleanup(func() {
		db.Close()
		s.Close()
	})
	if err := db.Ping(); err != nil {
		t.Fatalf("MariaDB at %s: %v", cfg.Addr, err)
	}
	return s, db
}

// TestSockets: every connection of the pool is known by its socket, which
// keeps the store's state; Exec and a pinned statement cut by their ctx
// fail at once with its cause; Cut closes the sockets and refuses dials.
func TestSockets(t *testing.T) {
	ctx := context.Background()
	s, db := open(t)
	p, err := s.Pin(ctx, db)
	if err != nil || p.Sock == nil {
		t.Fatalf("Pin = %+v, %v; want a known socket", p, err)
	}
	p.Sock.State = 7
	if again := s.Of(p.Conn); again != p.Sock || again.State != 7 || s.Len() != 1 {
		t.Fatalf("Of = %p (state %d), %d sockets; want %p, 7, 1", again, again.State, s.Len(), p.Sock)
	}
	cause := errors.New("the caller gave up")
	cctx, cancel := context.WithCancelCause(ctx)
	time.AfterFunc(50*time.Millisecond, func() { cancel(cause) })
	start := time.Now()
	if err := p.QueryRow(cctx, "SELECT SLEEP(5)", nil, new(int)); !errors.Is(err, cause) || time.Since(start) > 2*time.Second {
		t.Fatalf("QueryRow cut after 50ms = %v after %v; want the cause, at once", err, time.Since(start))
	}
	Discard(p.Conn)
	if _, err := s.Exec(ctx, db, "DO 1", nil); err != nil {
		t.Fatalf("Exec after a cut socket: %v", err)
	}
	s.Cut()
	if _, err := s.Pin(ctx, db); err == nil {
		t.Fatal("Pin after Cut succeeded")
	}
}

// TestQueryUint: a statement runs kept prepared, is prepared once per
// connection, and again once the server forgot it; NULL is not valid.
func TestQueryUint(t *testing.T) {
	ctx := context.Background()
	s, db := open(t)
	p, err := s.Pin(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Conn.Close()
	for i := range 3 {
		if v, valid, err := p.QueryUint(ctx, "SELECT ?", []any{40 + i}); v != uint64(40+i) || !valid || err != nil {
			t.Fatalf("QueryUint = %d, %v, %v; want %d", v, valid, err, 40+i)
		}
	}
	if _, valid, err := p.QueryUint(ctx, "SELECT NULL + ?", []any{1}); valid || err != nil {
		t.Fatalf("QueryUint of NULL = valid %v, %v", valid, err)
	}
	stmts, text := p.Sock.Kept()
	if len(stmts) != 2 || text {
		t.Fatalf("%d statements kept, text only %v; want 2, false", len(stmts), text)
	}
	// the server forgets them, as after a session reset: each is closed
	// through a copy of its handle, which the socket's map does not see
	before := maps.Clone(stmts)
	err = p.Conn.Raw(func(any) error {
		for _, st := range stmts {
			dup := reflect.New(reflect.TypeOf(st).Elem())
			dup.Elem().Set(reflect.ValueOf(st).Elem())
			if err := dup.Interface().(driver.Stmt).Close(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, valid, err := p.QueryUint(ctx, "SELECT ?", []any{9}); v != 9 || !valid || err != nil {
		t.Fatalf("QueryUint of a forgotten statement = %d, %v, %v; want 9", v, valid, err)
	}
	if after, _ := p.Sock.Kept(); after["SELECT ?"] == nil || after["SELECT ?"] == before["SELECT ?"] {
		t.Fatal("the forgotten statement was not prepared again")
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

// TestKeep: up to N connections are kept, the newest handed out first;
// those kept for For go back to the pool on their own; Close returns the
// rest, and a Put after it keeps nothing.
func TestKeep(t *testing.T) {
	ctx := context.Background()
	s, db := open(t)
	k := &Keep[int]{N: 2, For: time.Hour}
	var ps []Pinned[int]
	for range 3 {
		p, err := s.Pin(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		k.Put(p)
	}
	if n := db.Stats().InUse; n != 2 {
		t.Fatalf("%d connections in use after 3 Puts; want the 2 kept", n)
	}
	if p, ok := k.Get(); !ok || p.Sock != ps[1].Sock {
		t.Fatalf("Get = %v; want the newest kept", ok)
	} else {
		k.Put(p)
	}
	k.Close()
	if n := db.Stats().InUse; n != 0 {
		t.Fatalf("%d connections in use after Close; want 0", n)
	}
	p, err := s.Pin(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	k.Put(p)
	if _, ok := k.Get(); ok || db.Stats().InUse != 0 {
		t.Fatalf("Put after Close kept its connection")
	}

	short := &Keep[int]{N: 2, For: 100 * time.Millisecond}
	defer short.Close()
	p, err = s.Pin(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	short.Put(p)
	testutil.Poll(t, 5*time.Second, "the kept connection back in the pool", func() bool { return db.Stats().InUse == 0 })
	if _, ok := short.Get(); ok {
		t.Fatal("Get returned a connection kept past For")
	}
}
