package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/internal/poll"
)

// SentinelOptions configure StartRedisSentinel.
type SentinelOptions struct {
	// MasterName is the monitored master's name. Default: "mymaster".
	MasterName string
	// Replica starts a replica of the master too, which Sentinel promotes
	// when the master fails. Default: false (master only).
	Replica bool
	// Password is the requirepass of the master and the replica (and their
	// masterauth, and the Sentinel's auth-pass). Default: "" (none).
	Password string
	// SentinelUsername is an ACL user of the Sentinel itself, which then
	// refuses the default user. Needs SentinelPassword. Default: "".
	SentinelUsername string
	// SentinelPassword is the Sentinel's own password: the password of
	// SentinelUsername, or its requirepass. Default: "" (none).
	SentinelPassword string
	// DownAfter is Sentinel's down-after-milliseconds: how long the master
	// must not answer before it is failed over. Default: 500 ms.
	DownAfter time.Duration
	// LinkProxy makes the replica replicate through a Proxy (the
	// deployment's Link), so that a test can cut replication. Needs
	// Replica. Default: false (a direct link).
	LinkProxy bool
}

// RedisSentinel is a throwaway Sentinel deployment started by a test: a
// master, optionally a replica, and one Sentinel monitoring them with a
// quorum of 1, every process on a free port. Everything is killed when the
// test ends.
type RedisSentinel struct {
	// Addr is the Sentinel's "127.0.0.1:port".
	Addr string
	// MasterName is the monitored master's name.
	MasterName string
	// Master is the master at start.
	Master *RedisServer
	// Replica is the replica at start, or nil.
	Replica *RedisServer
	// Sentinel is the Sentinel process.
	Sentinel *RedisServer
	// Link is the proxy the replica replicates through (LinkProxy), or
	// nil: Stall or Cut it to stop replication.
	Link *Proxy
}

// StartRedisSentinel starts a master, the replica when o.Replica (and
// waits until it is in sync), then a Sentinel with a generated
// sentinel.conf, and waits until the Sentinel sees the master (and the
// replica) with status ok.
func StartRedisSentinel(t testing.TB, o SentinelOptions) *RedisSentinel {
	t.Helper()
	if o.MasterName == "" {
		o.MasterName = "mymaster"
	}
	if o.DownAfter == 0 {
		o.DownAfter = 500 * time.Millisecond
	}
	if o.SentinelUsername != "" && o.SentinelPassword == "" {
		t.Fatal("testutil: SentinelUsername needs SentinelPassword")
	}
	// No 5 s wait for more replicas before a full sync.
	dataArgs := []string{"--repl-diskless-sync-delay", "0"}
	var dataAuth []string
	if o.Password != "" {
		dataAuth = []string{o.Password}
		dataArgs = append(dataArgs, "--requirepass", o.Password, "--masterauth", o.Password)
	}
	s := &RedisSentinel{MasterName: o.MasterName}
	s.Master = startRedis(t, FreePort(t), t.TempDir(), redisSpec{auth: dataAuth, extra: dataArgs})
	if o.LinkProxy && !o.Replica {
		t.Fatal("testutil: LinkProxy needs Replica")
	}
	if o.Replica {
		port := s.Master.Port
		if o.LinkProxy {
			s.Link = NewProxy(t, s.Master.Addr)
			port = s.Link.Port()
		}
		args := append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(port)}, dataArgs...)
		s.Replica = startRedis(t, FreePort(t), t.TempDir(), redisSpec{auth: dataAuth, extra: args})
		// In sync before the Sentinel starts, so that its first INFO of the
		// master already lists the replica.
		await(t, "replica in sync", func() (bool, string) {
			info, err := s.Master.Command("INFO", "replication")
			return err == nil && strings.Contains(info, "connected_slaves:1") &&
				strings.Contains(info, "state=online"), info
		})
	}

	dir := t.TempDir()
	conf := []string{
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1", o.MasterName, s.Master.Port),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", o.MasterName, o.DownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s 10000", o.MasterName),
		fmt.Sprintf("sentinel parallel-syncs %s 1", o.MasterName),
	}
	if o.Password != "" {
		conf = append(conf, fmt.Sprintf("sentinel auth-pass %s %s", o.MasterName, o.Password))
	}
	var sentinelAuth []string
	switch {
	case o.SentinelUsername != "":
		conf = append(conf, "user default off",
			fmt.Sprintf("user %s on >%s ~* &* +@all", o.SentinelUsername, o.SentinelPassword))
		sentinelAuth = []string{o.SentinelUsername, o.SentinelPassword}
	case o.SentinelPassword != "":
		conf = append(conf, "requirepass "+o.SentinelPassword)
		sentinelAuth = []string{o.SentinelPassword}
	}
	path := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(path, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Sentinel = startRedis(t, FreePort(t), dir, redisSpec{conf: path, sentinel: true, auth: sentinelAuth})
	s.Addr = s.Sentinel.Addr

	want := "slaves=0"
	if o.Replica {
		want = "slaves=1"
	}
	await(t, "Sentinel sees the master", func() (bool, string) {
		info, err := s.Sentinel.Command("INFO", "sentinel")
		return err == nil && strings.Contains(info, "status=ok") &&
			strings.Contains(info, "address="+s.Master.Addr) && strings.Contains(info, want), info
	})
	return s
}

// MasterAddr returns the master's address as the Sentinel reports it now.
func (s *RedisSentinel) MasterAddr() (string, error) {
	info, err := s.Sentinel.Command("INFO", "sentinel")
	if err != nil {
		return "", err
	}
	for _, field := range strings.FieldsFunc(info, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		if addr, ok := strings.CutPrefix(field, "address="); ok {
			return addr, nil
		}
	}
	return "", fmt.Errorf("testutil: no master address in INFO sentinel: %q", info)
}

// WaitFailover waits up to 20 s until the Sentinel reports a master other
// than old and that master answers as a master, and returns it.
func (s *RedisSentinel) WaitFailover(t testing.TB, old string) *RedisServer {
	t.Helper()
	var next *RedisServer
	var addr string
	var err error
	if !poll.Until(20*time.Second, 20*time.Millisecond, func() bool {
		if addr, err = s.MasterAddr(); err == nil && addr != old {
			for _, n := range []*RedisServer{s.Master, s.Replica} {
				if n != nil && n.Addr == addr {
					next = n
				}
			}
		}
		return next != nil
	}) {
		t.Fatalf("no failover from %s within 20 s (master now %q, %v); Sentinel log:\n%s", old, addr, err, s.Sentinel.Log())
	}
	await(t, "the new master takes writes", func() (bool, string) {
		info, err := next.Command("INFO", "replication")
		return err == nil && strings.Contains(info, "role:master"), info
	})
	return next
}

// await checks cond every 20 ms until it reports true, and fails the test
// with cond's last detail after 20 s.
func await(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	var detail string
	if !poll.Until(20*time.Second, 20*time.Millisecond, func() bool {
		ok, d := cond()
		detail = d
		return ok
	}) {
		t.Fatalf("testutil: timed out waiting: %s (last: %q)", what, detail)
	}
}
