//go:build linux

package faultsuite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql", for KILL CONNECTION
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for pg_terminate_backend

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// FailoverGap is the least time between two Sentinel fail-overs of a run;
// a fail-over due sooner is skipped.
const FailoverGap = 12 * time.Second

// store is a mode's throwaway store and its store-side faults.
type store struct {
	// upstreams are what each child's proxies forward to, one proxy per
	// address; none when the children connect directly (file, Sentinel).
	upstreams []string
	// target is a child's driver target when it connects through addrs
	// (its proxies' addresses, in the order of upstreams).
	target func(addrs []string) string
	master string

	restart  func()                                      // FaultRestart
	failover func(tb testing.TB, lag time.Duration) bool // FaultFailover, FaultLagFailover; false: skipped (replica not in sync)
	backend  func(context.Context) error                 // FaultBackend

	keys []string // the run's lock names (set by Run)

	leaderKill  func(down time.Duration) error // FaultLeaderKill
	memberPause func(i int, d time.Duration)   // FaultMemberPause: upstreams[i]'s server
}

// setupStore starts the mode's throwaway store (never a shared server:
// the faults kill its processes and backends). A missing server binary
// fails tb with a message naming it.
func setupStore(tb testing.TB, mode string) *store {
	tb.Helper()
	switch mode {
	case "file":
		dir := tb.TempDir()
		return &store{target: func([]string) string { return dir }}
	case "redis":
		srv := testutil.StartRedis(tb)
		return &store{upstreams: []string{srv.Addr}, target: func(a []string) string { return a[0] }, restart: srv.Restart}
	case "sentinel":
		s := testutil.StartRedisSentinel(tb, testutil.SentinelOptions{Replica: true})
		var last time.Time
		return &store{target: func([]string) string { return s.Addr }, master: s.MasterName,
			failover: func(tb testing.TB, lag time.Duration) bool {
				// Sentinel reads a replica's INFO every 10 s: a replica it
				// has not seen in sync since the last fail-over is no
				// "good slave" and the fail-over would be aborted.
				if time.Since(last) < FailoverGap {
					return false
				}
				ok := sentinelFailover(tb, s, lag)
				if ok {
					last = time.Now()
				}
				return ok
			}}
	case "cluster":
		return setupCluster(tb)
	case "postgres-advisory", "postgres-table":
		pg := testutil.StartPostgres(tb)
		db := openDB(tb, "pgx", pg.DSN)
		return &store{
			upstreams: []string{fmt.Sprintf("127.0.0.1:%d", pg.Port)},
			target:    func(a []string) string { return "postgres://postgres@" + a[0] + "/postgres?sslmode=disable" },
			backend:   func(ctx context.Context) error { return killPGBackend(ctx, db) },
		}
	case "mysql-advisory", "mysql-table":
		m := testutil.StartMariaDB(tb)
		db := openDB(tb, "mysql", m.DSN())
		return &store{
			upstreams: []string{m.Addr()},
			target:    func(a []string) string { return "root@tcp(" + a[0] + ")/test" },
			backend:   func(ctx context.Context) error { return killMySQLConnection(ctx, db) },
		}
	case "etcd":
		return setupEtcd(tb)
	}
	tb.Fatalf("faultsuite: no store for mode %q", mode)
	return nil
}

func openDB(tb testing.TB, driver, dsn string) *sql.DB {
	tb.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		tb.Fatalf("faultsuite: open %s: %v", driver, err)
	}
	db.SetMaxOpenConns(1)
	tb.Cleanup(func() { db.Close() })
	return db
}

// killPGBackend terminates one client backend of the children, one
// holding an advisory lock when there is one.
func killPGBackend(ctx context.Context, db *sql.DB) error {
	_, err := db.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM (
		SELECT a.pid FROM pg_stat_activity a
		WHERE a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()
		ORDER BY EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory') DESC, random()
		LIMIT 1) v`)
	return err
}

// killMySQLConnection kills one client connection of the children.
func killMySQLConnection(ctx context.Context, db *sql.DB) error {
	var id int64
	err := db.QueryRowContext(ctx, `SELECT id FROM information_schema.processlist
		WHERE id <> CONNECTION_ID() AND command <> 'Daemon' AND db = 'test' ORDER BY RAND() LIMIT 1`).Scan(&id)
	if err == sql.ErrNoRows {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)) // id is an integer
	return err
}

// sentinelFailover kills the current master once its replica is in sync,
// waits for the promotion and restarts the old master (Sentinel makes it a
// replica of the new one). With lag, the replication is cut that long
// before the master dies: the replica is frozen (SIGSTOP, so that it
// cannot reconnect) and its link killed on the master (CLIENT KILL TYPE
// replica: what the master sends from then on never reaches it), and it is
// thawed once the master is dead. It reports false, doing nothing, when
// the replica is not in sync yet.
func sentinelFailover(tb testing.TB, s *testutil.RedisSentinel, lag time.Duration) bool {
	old, err := s.MasterAddr()
	if err != nil {
		return false
	}
	var cur *testutil.RedisServer
	for _, n := range []*testutil.RedisServer{s.Master, s.Replica} {
		if n.Addr == old {
			cur = n
		}
	}
	if cur == nil {
		return false
	}
	info, err := cur.Command("INFO", "replication")
	if err != nil || !strings.Contains(info, "connected_slaves:1") || !strings.Contains(info, "state=online") {
		return false
	}
	next := s.Replica
	if cur == s.Replica {
		next = s.Master
	}
	if lag > 0 {
		if err := next.Signal(syscall.SIGSTOP); err != nil {
			return false
		}
		if _, err := cur.Command("CLIENT", "KILL", "TYPE", "replica"); err != nil {
			_ = next.Signal(syscall.SIGCONT)
			return false
		}
		time.Sleep(lag) // the length of the cut is the fault
	}
	cur.Kill()
	if lag > 0 {
		_ = next.Signal(syscall.SIGCONT)
	}
	s.WaitFailover(tb, old)
	cur.Restart()
	return true
}
