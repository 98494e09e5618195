package mysql

import (
	"database/sql"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestSessionReadOnce: on the driver's own pool, a connection's session
// (its id, a reading of the server's clock, the boot time) is read at its
// first acquisition and kept with its socket; later acquisitions on it take
// it from there, for every fence source, and their locks start with its
// boot time. What is kept is the session the server names as the lock's
// holder, and probes find the locks held.
func TestSessionReadOnce(t *testing.T) {
	admin := openDB(t, testutil.MySQLDSN())
	var boot int64
	if err := admin.QueryRowContext(ctxT(t), "SELECT "+bootSQL[0]).Scan(&boot); err != nil {
		t.Fatal(err)
	}
	for _, fence := range []string{FenceSequence, FenceUUIDShort, FenceCounter} {
		t.Run(fence, func(t *testing.T) {
			ctx := ctxT(t)
			opts := Options{DSN: testutil.MySQLDSN(), Fence: fence, ProbeInterval: time.Hour}
			if fence == FenceCounter {
				opts.FenceTable = "mutexfx_test_fence_counter"
			}
			d := openDriver(t, opts)
			acquire := func(key, tok string) *heldLock {
				t.Helper()
				if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
					t.Fatalf("Acquire = %+v, %v", res, err)
				}
				h := adv(d).get(key, tok)
				var holder sql.NullInt64
				if err := admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", h.name).Scan(&holder); err != nil {
					t.Fatal(err)
				}
				if !holder.Valid || holder.Int64 != h.connID {
					t.Fatalf("the server names session %v as the holder; the driver recorded %d", holder, h.connID)
				}
				if got := h.boot.Load(); got < boot-bootSlack || got > boot+bootSlack {
					t.Fatalf("the lock starts with boot time %d; want the server's, %d ± %d", got, boot, bootSlack)
				}
				if r := d.Renew(ctx, []drivers.Lease{{Key: key, Token: tok, TTL: time.Minute}})[0]; r.Err != nil || !r.Held {
					t.Fatalf("Renew = %+v; want held", r)
				}
				return h
			}
			key, tok := "mysqltest:"+runID+":"+t.Name(), token()
			h1 := acquire(key+":1", tok)
			if h1.conn.Sock == nil {
				t.Fatal("a connection of the driver's own pool has no socket")
			}
			known := h1.conn.Sock.State.sess.Load()
			if known == nil || known.conn != h1.connID || known.at != h1.takenAt {
				t.Fatalf("kept session %+v; want the acquisition's {%d %d}", known, h1.connID, h1.takenAt)
			}
			var now int64
			if err := admin.QueryRowContext(ctx, "SELECT "+takenSQL).Scan(&now); err != nil {
				t.Fatal(err)
			}
			if h1.takenAt > now || h1.takenAt <= boot+2*bootSlack {
				t.Fatalf("session's clock reading %d; want after the boot's seconds (%d) and not after the server's clock %d", h1.takenAt, boot+2*bootSlack, now)
			}
			if ok, err := d.Release(ctx, key+":1", tok); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			// An earlier reading of the same session, which no statement
			// could return now: seen in the next lock only if it is taken
			// from the socket.
			earlier := *known
			earlier.at--
			h1.conn.Sock.State.sess.Store(&earlier)
			h2 := acquire(key+":2", tok) // on the kept connection
			if h2.conn.Sock != h1.conn.Sock || h2.connID != earlier.conn || h2.takenAt != earlier.at {
				t.Fatalf("second acquisition: same socket %v, session {%d %d}; want the kept {%d %d}",
					h2.conn.Sock == h1.conn.Sock, h2.connID, h2.takenAt, earlier.conn, earlier.at)
			}
			if ok, err := d.Release(ctx, key+":2", tok); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
		})
	}
}

// TestSessionYoungServer: a connection whose session is read in the
// server's first seconds (here: a boot time in the future) is not kept
// that way; its acquisitions read the session in their own statement. One
// that reads the clock past those seconds (here: once the boot time the
// connection remembers is moved back) is kept.
func TestSessionYoungServer(t *testing.T) {
	ctx := ctxT(t)
	d := openDriver(t, Options{DSN: testutil.MySQLDSN(), ProbeInterval: time.Hour})
	adv(d).bootSQL = []string{"CAST(UNIX_TIMESTAMP() + 1000 AS SIGNED)"}
	key, tok := "mysqltest:"+runID+":"+t.Name(), token()
	pair := func() (*socket, session) {
		t.Helper()
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		h := adv(d).get(key, tok)
		if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		return h.conn.Sock, session{conn: h.connID, at: h.takenAt, boot: h.boot.Load()}
	}
	sock, first := pair()
	boot := sock.State.boot.Load()
	if sock.State.sess.Load() != nil || boot <= first.at || first.boot != 0 {
		t.Fatalf("session %+v read with boot time %d: kept %v; want it not kept, the boot time remembered, the lock's boot left to the probes",
			first, boot, sock.State.sess.Load())
	}
	again, s := pair()
	if again != sock || s.conn != first.conn || s.at < first.at || sock.State.sess.Load() != nil {
		t.Fatalf("in the boot's seconds: same socket %v, session %+v (first %+v), kept %v; want the same connection, read again, not kept",
			again == sock, s, first, sock.State.sess.Load())
	}
	sock.State.boot.Store(first.at - 2*bootSlack - 1) // as if its clock had moved past the boot's seconds
	if again, s = pair(); again != sock || s.conn != first.conn {
		t.Fatalf("after the boot's seconds: same socket %v, session %+v; want the same connection", again == sock, s)
	}
	if kept := sock.State.sess.Load(); kept == nil || kept.conn != s.conn || kept.at != s.at || kept.boot != first.at-2*bootSlack-1 {
		t.Fatalf("kept session %+v; want %+v with the remembered boot time", kept, s)
	}
}

// TestSessionUnreadable: a connection whose session statement the server
// refuses (here: a boot time expression that fails) still acquires, reading
// its session in the acquire statement, and does not ask again.
func TestSessionUnreadable(t *testing.T) {
	ctx := ctxT(t)
	d := openDriver(t, Options{DSN: testutil.MySQLDSN(), ProbeInterval: time.Hour})
	adv(d).bootSQL = []string{"(SELECT 1 UNION ALL SELECT 2)"} // error 1242
	key, tok := "mysqltest:"+runID+":"+t.Name(), token()
	for i := range 2 {
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
			t.Fatalf("Acquire #%d = %+v, %v", i, res, err)
		}
		h := adv(d).get(key, tok)
		if h.connID == 0 || h.takenAt == 0 || h.conn.Sock.State.sess.Load() != nil || h.conn.Sock.State.boot.Load() != bootNoCache {
			t.Fatalf("Acquire #%d: session {%d %d}, kept %v, boot mark %d; want read by the acquisition, not kept, marked",
				i, h.connID, h.takenAt, h.conn.Sock.State.sess.Load(), h.conn.Sock.State.boot.Load())
		}
		if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
	}
}
