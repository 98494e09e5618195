package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/dbconn"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestFaults breaks a throwaway mariadbd (one for all cases: creating one
// takes about two seconds) under held locks, in both modes.
func TestFaults(t *testing.T) {
	srv := testutil.StartMariaDB(t)
	admin := openDB(t, srv.DSN())
	// A lock taken in a server's first seconds is reported lost (advisory_session.go).
	waitUptime(t, admin)

	t.Run("PrepareRefused", func(t *testing.T) {
		// The server refuses every prepare: the advisory statements run as
		// text on that connection (socket.go), and locks work as before.
		ctx := ctxT(t)
		if _, err := admin.ExecContext(ctx, "SET GLOBAL max_prepared_stmt_count = 0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := admin.ExecContext(context.Background(), "SET GLOBAL max_prepared_stmt_count = DEFAULT"); err != nil {
				t.Error(err)
			}
		})
		d := openDriver(t, Options{DSN: srv.DSN(), ProbeInterval: time.Hour})
		var last uint64
		for range 3 {
			tok := token()
			res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "refused", Token: tok, TTL: time.Minute})
			if err != nil || !res.Acquired || res.Fence <= last {
				t.Fatalf("Acquire = %+v, %v; want a fence above %d", res, err, last)
			}
			last = res.Fence
			sock := adv(d).get("refused", tok).conn.Sock
			if ok, err := d.Release(ctx, "refused", tok); err != nil || !ok {
				t.Fatalf("Release = %v, %v", ok, err)
			}
			if sock == nil || !sock.TextOnly() || len(sock.Stmts()) != 0 {
				t.Fatalf("socket %+v: want it known, marked to run the statements as text, with none kept", sock)
			}
		}
	})

	t.Run("ServerAutocommitOff", func(t *testing.T) { serverAutocommitOff(t, srv, admin) })

	t.Run("KillAdvisoryConnection", func(t *testing.T) {
		ctx := ctxT(t)
		m := newMutex(t, Options{DSN: srv.DSN()}, 30*time.Second)
		l, err := m.Acquire(ctx, "kill")
		if err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", lockName(l.Key())).Scan(&id); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		if _, err := admin.ExecContext(ctx, "KILL ?", id); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.Done():
		case <-time.After(time.Second):
			t.Fatalf("lock not lost %v after its connection was killed", time.Since(killed))
		}
		if !errors.Is(l.Err(), component.ErrLost) {
			t.Fatalf("cause %v; want ErrLost", l.Err())
		}
		t.Logf("lost %v after KILL", time.Since(killed))
		// the driver goes on with new connections
		l2, err := m.Acquire(ctx, "kill")
		if err != nil {
			t.Fatalf("Acquire after the kill: %v", err)
		}
		if l2.Fence() <= l.Fence() {
			t.Errorf("fence %d after %d", l2.Fence(), l.Fence())
		}
		l2.Release(ctx)
	})

	t.Run("KillTableConnections", func(t *testing.T) {
		ctx := ctxT(t)
		d := openDriver(t, Options{DSN: srv.DSN(), Mode: ModeTable})
		key, tok := "kill-table", token()
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: 10 * time.Second}); err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		killAllBut(t, admin)
		// A row lock is no session's: killing the pool's connections loses
		// nothing; the next call reconnects.
		ok, err := d.Extend(ctx, key, tok, 10*time.Second)
		for i := 0; err != nil && i < 3; i++ { // a pooled connection may be a killed one
			ok, err = d.Extend(ctx, key, tok, 10*time.Second)
		}
		if err != nil || !ok {
			t.Fatalf("Extend after KILL = %v, %v; want true", ok, err)
		}
		if ok, err := d.Release(ctx, key, tok); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
	})

	t.Run("ProxyStallAdvisory", func(t *testing.T) {
		ctx := ctxT(t)
		p := testutil.NewProxy(t, srv.Addr())
		ttl := 600 * time.Millisecond
		m := newMutex(t, Options{Host: "127.0.0.1", Port: p.Port(), Database: "test"}, ttl)
		l, err := m.Acquire(ctx, "stall")
		if err != nil {
			t.Fatal(err)
		}
		p.Stall()
		stalled := time.Now()
		select {
		case <-l.Done():
		case <-time.After(2 * ttl):
			t.Fatalf("lock not lost %v after the link stalled (ttl %v)", time.Since(stalled), ttl)
		}
		t.Logf("lost %v after the stall", time.Since(stalled))
		p.Resume()
		// the holder dropped its connection, so the server frees the lock
		other := newMutex(t, Options{DSN: srv.DSN()}, ttl)
		l2, err := other.Acquire(ctx, "stall", component.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatalf("lock not freed after the stalled holder gave up: %v", err)
		}
		l2.Release(ctx)
	})

	t.Run("ProxyStallTable", func(t *testing.T) {
		ctx := ctxT(t)
		p := testutil.NewProxy(t, srv.Addr())
		ttl := 600 * time.Millisecond
		m := newMutex(t, Options{Host: "127.0.0.1", Port: p.Port(), Database: "test", Mode: ModeTable}, ttl)
		l, err := m.Acquire(ctx, "stall-table")
		if err != nil {
			t.Fatal(err)
		}
		p.Stall()
		t.Cleanup(p.Resume)
		other := newMutex(t, Options{DSN: srv.DSN(), Mode: ModeTable}, ttl)
		l2, err := other.Acquire(ctx, "stall-table", component.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatalf("the expired lock was not taken: %v", err)
		}
		select {
		case <-l.Done():
		default:
			t.Fatalf("the stalled holder still thinks it holds the lock another holder got")
		}
		if l2.Fence() <= l.Fence() {
			t.Errorf("fence %d after %d", l2.Fence(), l.Fence())
		}
		l2.Release(ctx)
	})

	for _, mode := range []string{ModeAdvisory, ModeTable} {
		for _, first := range []bool{false, true} {
			name := "CloseCutsStalledCalls/" + mode
			if first {
				name += "/FirstDial"
			}
			t.Run(name, func(t *testing.T) { closeCutsStalledCalls(t, srv.Addr(), mode, false, false, first) })
			t.Run(name+"/NewWithDB", func(t *testing.T) { closeCutsStalledCalls(t, srv.Addr(), mode, true, false, first) })
			t.Run(name+"/RegisteredNetwork", func(t *testing.T) { closeCutsStalledCalls(t, srv.Addr(), mode, false, true, first) })
		}
	}

	// The restart subtests run last: they kill the server.
	t.Run("RestartReusedConnectionID", func(t *testing.T) {
		ctx := ctxT(t)
		d := openDriver(t, Options{DSN: srv.DSN(), ProbeInterval: time.Hour}) // Renew probes
		key, tok := "reused-id", token()
		if res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute}); err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		id := adv(d).get(key, tok).connID
		// No probe before the restart: none has seen the first boot time,
		// so only the lock's time of acquisition tells the restart.
		srv.Restart()
		// Connection ids start again from 1: another client's session with
		// the dead holder's id takes its lock.
		other := openDB(t, srv.DSN())
		takeWithID(t, other, id, lockName(key))
		var info drivers.LockInfo
		var held bool
		var err error
		for range 3 { // the pool's first connections are the dead ones
			if info, held, err = d.Inspect(ctx, key); err == nil {
				break
			}
		}
		if err != nil || !held || info.Token != "" {
			t.Fatalf("Inspect after the restart = %+v, %v, %v; want held by another session (no token)", info, held, err)
		}
		var r drivers.RenewResult
		for range 3 { // the pool's first connections are the dead ones
			if r = d.Renew(ctx, []drivers.Lease{{Key: key, Token: tok, TTL: time.Minute}})[0]; r.Err == nil {
				break
			}
		}
		if r.Err != nil || r.Held {
			t.Fatalf("Renew after the restart = %+v; want not held (another session with id %d holds the lock)", r, id)
		}
	})

	t.Run("Restart", func(t *testing.T) {
		ctx := ctxT(t)
		waitUptime(t, openDB(t, srv.DSN())) // restarted by the subtest before
		adv := newMutex(t, Options{DSN: srv.DSN()}, 30*time.Second)
		tab := openDriver(t, Options{DSN: srv.DSN(), Mode: ModeTable})
		la, err := adv.Acquire(ctx, "restart")
		if err != nil {
			t.Fatal(err)
		}
		key, tok := "restart-table", token()
		res, err := tab.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: tok, TTL: time.Minute})
		if err != nil || !res.Acquired {
			t.Fatalf("Acquire = %+v, %v", res, err)
		}
		srv.Restart()
		restarted := time.Now()
		select {
		case <-la.Done():
		case <-time.After(3 * time.Second):
			t.Fatalf("advisory lock not lost %v after the server restarted", time.Since(restarted))
		}
		t.Logf("advisory lock lost %v after the restart", time.Since(restarted))
		// The table lock survives (InnoDB is durable) and its fence grows on.
		waitFor(t, 10*time.Second, "the table lock's extend", func() bool {
			ok, err := tab.Extend(ctx, key, tok, time.Minute)
			return err == nil && ok
		})
		if ok, err := tab.Release(ctx, key, tok); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		res2, err := tab.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: token(), TTL: time.Second})
		if err != nil || !res2.Acquired || res2.Fence <= res.Fence {
			t.Fatalf("Acquire after restart = %+v, %v; want a fence above %d", res2, err, res.Fence)
		}
		// Advisory fences only grow across a restart too (the sequence skips
		// its cached range).
		l2, err := adv.Acquire(ctx, "restart", component.WithTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if l2.Fence() <= la.Fence() {
			t.Errorf("advisory fence %d after %d across a restart", l2.Fence(), la.Fence())
		}
		l2.Release(ctx)
	})

	t.Run("CrashWithoutDurableCommits", func(t *testing.T) {
		// Table-mode locks and counter fences are as durable as the
		// server's commits (docs/mysql.md). With
		// innodb_flush_log_at_trx_commit=0 a commit reaches the redo log only
		// when InnoDB writes it on its own (here at most every 45 min): a
		// crash forgets the acquisition's row write. The fence given next is
		// still greater (the clock's), on a new row and on a row that was
		// there before. The redo may still be written before the kill (a
		// page flush writes it): then the try is made again, on other keys.
		ctx := ctxT(t)
		stores := []struct {
			name, table string
			opts        Options
		}{
			{"table", DefaultTable, Options{DSN: srv.DSN(), Mode: ModeTable}},
			{"counter", "crash_counter", Options{DSN: srv.DSN(), Fence: FenceCounter, FenceTable: "crash_counter"}},
		}
		forgot := map[string]bool{}
		for try := 0; try < 5 && len(forgot) < 2*len(stores); try++ {
			type taken struct {
				store, key, table string
				opts              Options
				fence             uint64
			}
			var lost []taken
			admin := openDB(t, srv.DSN())
			for _, st := range stores {
				d := openDriver(t, st.opts)
				old := fmt.Sprintf("crash-%d-old", try)
				res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: old, Token: "durable", TTL: time.Minute})
				if err != nil || !res.Acquired {
					t.Fatalf("%s: Acquire = %+v, %v", st.name, res, err)
				}
				if ok, err := d.Release(ctx, old, "durable"); err != nil || !ok {
					t.Fatalf("%s: Release = %v, %v", st.name, ok, err)
				}
				for _, key := range []string{old, fmt.Sprintf("crash-%d-new", try)} {
					lost = append(lost, taken{st.name, key, st.table, st.opts, 0})
				}
			}
			for _, q := range []string{"SET GLOBAL innodb_flush_log_at_timeout = 2700", "SET GLOBAL innodb_flush_log_at_trx_commit = 0"} {
				if _, err := admin.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			for i, l := range lost {
				res, err := openDriver(t, l.opts).Acquire(ctx, drivers.AcquireRequest{Key: l.key, Token: token(), TTL: time.Minute})
				if err != nil || !res.Acquired {
					t.Fatalf("%s: Acquire = %+v, %v", l.store, res, err)
				}
				lost[i].fence = res.Fence
			}
			srv.Restart() // a SIGKILL; the server starts with the defaults again
			admin = openDB(t, srv.DSN())
			for _, l := range lost {
				var kept uint64
				err := admin.QueryRowContext(ctx, "SELECT fence FROM "+l.table+" WHERE name_hash = ?", sqlkit.KeyHash(l.key)).Scan(&kept)
				if err != nil && !errors.Is(err, sql.ErrNoRows) {
					t.Fatal(err)
				}
				if kept >= l.fence {
					t.Logf("try %d: %s: the acquisition of %s survived the crash", try, l.store, l.key)
					continue
				}
				res, err := openDriver(t, l.opts).Acquire(ctx, drivers.AcquireRequest{Key: l.key, Token: token(), TTL: time.Minute})
				if err != nil || !res.Acquired {
					t.Fatalf("%s: Acquire after the crash = %+v, %v", l.store, res, err)
				}
				if res.Fence <= l.fence {
					t.Errorf("%s: %s: fence %d given after the crash forgot fence %d; want a greater one", l.store, l.key, res.Fence, l.fence)
				}
				t.Logf("try %d: %s: the crash forgot fence %d of %s; the next is %d", try, l.store, l.fence, l.key, res.Fence)
				forgot[l.store+strings.TrimPrefix(l.key, fmt.Sprintf("crash-%d", try))] = true
			}
		}
		if len(forgot) < 2*len(stores) {
			t.Fatalf("the crashes forgot acquisitions made without a durable commit only for %v; want old and new rows of each", forgot)
		}
	})
}

// waitUptime waits until the server behind db has run long enough
// (bootSlack) for a lock taken from now on to count as taken after its
// boot.
func waitUptime(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := ctxT(t)
	waitFor(t, 5*time.Second, "the server's uptime", func() bool {
		var up int64
		err := db.QueryRowContext(ctx, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'Uptime'").Scan(&up)
		return err == nil && up > bootSlack
	})
}

// killAllBut kills every client connection of the server except admin's.
func killAllBut(t *testing.T, admin *sql.DB) {
	t.Helper()
	ctx := ctxT(t)
	conn, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND COMMAND <> 'Daemon' AND USER <> 'system user'")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		_, _ = conn.ExecContext(ctx, "KILL ?", id) // may have ended meanwhile
	}
}

// takeWithID opens sessions on db until the server gives one the id, then
// takes the GET_LOCK name on it; the session stays open until the test
// ends.
func takeWithID(t *testing.T, db *sql.DB, id int64, name string) {
	t.Helper()
	ctx := ctxT(t)
	for {
		conn, got := openSession(ctx, t, db)
		if got > id {
			t.Fatalf("the server gave id %d, past %d: cannot reuse it", got, id)
		}
		if got < id {
			dbconn.Discard(conn) // a new session next time
			continue
		}
		t.Cleanup(func() { conn.Close() })
		var ok int
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&ok); err != nil || ok != 1 {
			t.Fatalf("GET_LOCK on session %d = %d, %v", id, ok, err)
		}
		return
	}
}
