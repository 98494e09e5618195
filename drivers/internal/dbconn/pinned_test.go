package dbconn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestRunCancelled: a statement on a pinned connection with a known socket
// ends when its context does (the socket is cut under it), with the
// context's cause; one whose context already ended is not sent.
func TestRunCancelled(t *testing.T) {
	ctx, db, socks := openPool(t, mysqlPolicy)
	adm := admin(t)
	p, err := socks.Pin(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer Discard(p.Conn)
	id := connID(ctx, t, p)
	why := errors.New("caller gone")
	cctx, cancel := context.WithCancelCause(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := p.Exec(cctx, "DO SLEEP(30)", nil)
		errc <- err
	}()
	testutil.Poll(t, 10*time.Second, "the statement running in the server", func() bool {
		var n int
		err := adm.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND INFO LIKE 'DO SLEEP%'", id).Scan(&n)
		return err == nil && n > 0
	})
	start := time.Now()
	cancel(why)
	if err := <-errc; !errors.Is(err, why) {
		t.Fatalf("cancelled statement: %v; want the ctx's cause", err)
	}
	if e := time.Since(start); e > 5*time.Second {
		t.Fatalf("cancelled statement returned after %v", e)
	}
	var one int
	if err := p.QueryRow(cctx, "SELECT 1", nil, &one); !errors.Is(err, why) {
		t.Fatalf("statement with an ended ctx: %v; want the ctx's cause", err)
	}
}

// TestExecRetriesBadConn: Sockets.Exec on a pool whose connection the
// server closed takes another (the pool's liveness check needs the
// socket's raw connection) and succeeds; a nil Sockets runs on the pool.
func TestExecRetriesBadConn(t *testing.T) {
	ctx, db, socks := openPool(t, mysqlPolicy)
	db.SetMaxOpenConns(1)
	var id int64
	if err := db.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := admin(t).ExecContext(ctx, "KILL ?", id); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := socks.Exec(cctx, db, "DO 1", nil); err != nil {
		t.Fatalf("statement after the pooled connection was killed: %v", err)
	}
	if _, err := (*Sockets[state])(nil).Exec(cctx, db, "DO 1", nil); err != nil {
		t.Fatalf("without sockets: %v", err)
	}
}
