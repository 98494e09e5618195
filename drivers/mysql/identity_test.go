package mysql

import (
	"database/sql"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestSessionReadOnce: on the driver's own pool, a connection's session
// (its id and a reading of the server's clock) is read at its first
// acquisition and kept with its socket; later acquisitions on it take it
// from there, for every fence source. What is kept is the session the
// server names as the lock's holder, and probes find the locks held.
func TestSessionReadOnce(t *testing.T) {
	admin := openDB(t, testutil.MySQLDSN())
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
				h := d.adv.get(key, tok)
				var holder sql.NullInt64
				if err := admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", h.name).Scan(&holder); err != nil {
					t.Fatal(err)
				}
				if !holder.Valid || holder.Int64 != h.connID {
					t.Fatalf("the server names session %v as the holder; the driver recorded %d", holder, h.connID)
				}
				if r := d.Renew(ctx, []drivers.Lease{{Key: key, Token: tok, TTL: time.Minute}})[0]; r.Err != nil || !r.Held {
					t.Fatalf("Renew = %+v; want held", r)
				}
				return h
			}
			key, tok := "mysqltest:"+runID+":"+t.Name(), token()
			h1 := acquire(key+":1", tok)
			if h1.conn.sock == nil {
				t.Fatal("a connection of the driver's own pool has no socket")
			}
			known := h1.conn.sock.sess.Load()
			if known == nil || *known != (session{h1.connID, h1.takenAt}) {
				t.Fatalf("kept session %+v; want the acquisition's {%d %d}", known, h1.connID, h1.takenAt)
			}
			var now int64
			if err := admin.QueryRowContext(ctx, "SELECT "+takenSQL).Scan(&now); err != nil {
				t.Fatal(err)
			}
			if h1.takenAt > now {
				t.Fatalf("session's clock reading %d is after the server's clock %d", h1.takenAt, now)
			}
			if ok, err := d.Release(ctx, key+":1", tok); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			h2 := acquire(key+":2", tok) // on the kept connection
			if h2.conn.sock != h1.conn.sock || h2.connID != h1.connID || h2.takenAt != h1.takenAt {
				t.Fatalf("second acquisition: socket same %v, session {%d %d}; want the first's {%d %d}",
					h2.conn.sock == h1.conn.sock, h2.connID, h2.takenAt, h1.connID, h1.takenAt)
			}
			if ok, err := d.Release(ctx, key+":2", tok); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
		})
	}
}

// TestSessionYoungServer: a connection whose session is read in the
// server's first seconds (here: a boot time of now) is not kept that way;
// its acquisitions read the session in their own statement until one reads
// the clock past those seconds, which is then kept.
func TestSessionYoungServer(t *testing.T) {
	ctx := ctxT(t)
	admin := openDB(t, testutil.MySQLDSN())
	d := openDriver(t, Options{DSN: testutil.MySQLDSN(), ProbeInterval: time.Hour})
	d.adv.bootSQL = []string{"CAST(UNIX_TIMESTAMP() AS SIGNED)"} // booted this second
	key, tok := "mysqltest:"+runID+":"+t.Name(), token()
	pair := func() (*socket, session) {
		t.Helper()
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		h := d.adv.get(key, tok)
		if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		return h.conn.sock, session{h.connID, h.takenAt}
	}
	sock, first := pair()
	boot := sock.boot.Load()
	if sock.sess.Load() != nil || boot == 0 || first.at > boot+bootSlack {
		t.Fatalf("session %+v read at boot %d: kept %v; want it not kept, the boot remembered", first, boot, sock.sess.Load())
	}
	again, s := pair()
	if again != sock || s.conn != first.conn || sock.sess.Load() != nil {
		t.Fatalf("in the boot's seconds: same socket %v, session %+v (first %+v), kept %v; want the same, not kept",
			again == sock, s, first, sock.sess.Load())
	}
	waitFor(t, 10*time.Second, "the server's clock past the boot's seconds", func() bool {
		var now int64
		return admin.QueryRowContext(ctx, "SELECT "+takenSQL).Scan(&now) == nil && now > boot+bootSlack
	})
	// the kept connection went back to the pool meanwhile: the pool's
	// connection keeps its socket
	if again, s = pair(); again != sock || s.conn != first.conn || s.at <= boot+bootSlack {
		t.Fatalf("after the boot's seconds: same socket %v, session %+v; want the same connection, read after %d", again == sock, s, boot+bootSlack)
	}
	if kept := sock.sess.Load(); kept == nil || *kept != s {
		t.Fatalf("kept session %v; want %+v", kept, s)
	}
}
