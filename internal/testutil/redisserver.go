package testutil

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/internal/poll"
)

// RedisServer is a throwaway redis-server started by a test on a free port,
// without persistence, in a temporary directory. It is killed when the test
// ends. Kill and Restart let fault tests crash and revive it on the same
// port.
type RedisServer struct {
	// Addr is "127.0.0.1:port".
	Addr string
	// Port is the server's TCP port (its TLS port for a TLS server).
	Port int

	t    testing.TB
	dir  string
	spec redisSpec

	mu  sync.Mutex
	cmd *exec.Cmd
}

// redisSpec says how to start a throwaway server.
type redisSpec struct {
	conf     string      // config file given first (Sentinel needs one); "" for none
	sentinel bool        // --sentinel
	tls      *tls.Config // client config: serve TLS only on Port (plain port 0)
	auth     []string    // AUTH arguments of the test's own connections
	extra    []string    // more command-line arguments
}

// StartRedis starts a redis-server on a free port with extra command-line
// arguments (for example "--cluster-enabled", "yes") and waits until it
// answers PING (after AUTH when extra has "--requirepass", password). The test fails when the binary is missing or the server does
// not come up within 10 s.
func StartRedis(t testing.TB, extra ...string) *RedisServer {
	t.Helper()
	port := FreePort(t)
	if slices.Contains(extra, "--cluster-enabled") {
		port = clusterPort(t)
	}
	return startRedis(t, port, t.TempDir(), redisSpec{extra: extra})
}

// clusterPort is a free port for a Cluster node: at most 55535, since
// redis-server refuses a higher one (its cluster bus listens 10000 above,
// which must be free too). FreePort draws from the whole ephemeral range.
func clusterPort(t testing.TB) int {
	t.Helper()
	for range 1000 {
		p := FreePort(t)
		if p > 55535 {
			continue
		}
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+10000))); err == nil {
			_ = l.Close()
			return p
		}
	}
	t.Fatal("no free port at or below 55535 with its cluster bus port free")
	return 0
}

// startRedis starts a server on port in dir as spec says.
func startRedis(t testing.TB, port int, dir string, spec redisSpec) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server binary not found (scripts/stores.sh installs it): %v", err)
	}
	for i := 0; spec.auth == nil && i+1 < len(spec.extra); i++ {
		if spec.extra[i] == "--requirepass" {
			spec.auth = []string{spec.extra[i+1]}
		}
	}
	s := &RedisServer{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Port: port,
		t:    t,
		dir:  dir,
		spec: spec,
	}
	t.Cleanup(s.Kill)
	s.start()
	return s
}

func (s *RedisServer) start() {
	s.t.Helper()
	var args []string
	if s.spec.conf != "" {
		args = append(args, s.spec.conf)
	}
	if s.spec.sentinel {
		args = append(args, "--sentinel")
	}
	if s.spec.tls != nil {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(s.Port))
	} else {
		args = append(args, "--port", strconv.Itoa(s.Port))
	}
	args = append(args, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--logfile", filepath.Join(s.dir, "redis.log"))
	args = append(args, s.spec.extra...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	if !poll.Until(10*time.Second, 20*time.Millisecond, func() bool {
		reply, err := s.Command("PING")
		return err == nil && reply == "PONG"
	}) {
		s.t.Fatalf("redis-server on %s does not answer; log:\n%s", s.Addr, s.Log())
	}
}

// Log returns the server's log file (for failure messages).
func (s *RedisServer) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	return string(b)
}

// Command sends one command to the server over a fresh connection (TLS and
// AUTH as the server needs them) and returns a simple or bulk string reply,
// like RedisCommand.
func (s *RedisServer) Command(args ...string) (string, error) {
	return redisDo(s.Addr, s.spec.tls, s.spec.auth, args)
}

// Kill kills the server with SIGKILL (no shutdown, no save) and waits for
// it to exit. Killing a stopped server does nothing.
func (s *RedisServer) Kill() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// Restart starts the server again on the same port after Kill, with an
// empty dataset (there is no persistence).
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.Kill()
	s.start()
}

// RedisCluster is a throwaway Redis Cluster of three masters started by a
// test, each node a RedisServer.
type RedisCluster struct {
	// Addrs are the masters' addresses.
	Addrs []string
	// Nodes are the masters.
	Nodes []*RedisServer
	// Replicas are the masters' replicas (StartRedisClusterReplicas):
	// Replicas[i] replicates Nodes[i]. Nil without replicas.
	Replicas []*RedisServer
}

// StartRedisCluster starts three cluster-enabled redis-servers, assigns the
// 16384 slots among them (CLUSTER ADDSLOTSRANGE), joins them (CLUSTER
// MEET) and waits until every node reports cluster_state:ok.
func StartRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	return startCluster(t, 2*time.Second)
}

// startCluster is StartRedisCluster with a cluster-node-timeout.
func startCluster(t testing.TB, nodeTimeout time.Duration) *RedisCluster {
	t.Helper()
	c := &RedisCluster{}
	for i := 0; i < 3; i++ {
		n := startClusterNode(t, nodeTimeout)
		c.Nodes = append(c.Nodes, n)
		c.Addrs = append(c.Addrs, n.Addr)
	}
	ranges := [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}
	for i, n := range c.Nodes {
		if _, err := RedisCommand(n.Addr, "CLUSTER", "ADDSLOTSRANGE",
			strconv.Itoa(ranges[i][0]), strconv.Itoa(ranges[i][1])); err != nil {
			t.Fatalf("cluster addslots on %s: %v", n.Addr, err)
		}
		if i > 0 {
			if _, err := RedisCommand(n.Addr, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(c.Nodes[0].Port)); err != nil {
				t.Fatalf("cluster meet from %s: %v", n.Addr, err)
			}
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range c.Nodes {
		var info string
		var err error
		if !poll.Until(time.Until(deadline), 50*time.Millisecond, func() bool {
			info, err = RedisCommand(n.Addr, "CLUSTER", "INFO")
			return err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3")
		}) {
			t.Fatalf("cluster node %s not ready: %q %v", n.Addr, info, err)
		}
	}
	return c
}

// MarkRedisKnown creates the Redis driver's epoch marker ("mutexfx:epoch",
// see drivers/redis/epoch.go) on the server at addr unless it exists, as an
// operator who knows that a store forgot no lock may: the driver then
// grants at once instead of waiting one ttl after the server's start.
func MarkRedisKnown(addr string) error {
	_, err := RedisCommand(addr, "SET", "mutexfx:epoch", "0", "NX")
	return err
}

// RedisCommand sends one command to the Redis server at addr over a fresh
// connection (RESP2) and returns a simple or bulk string reply. It is for
// test setup, independent of any client library.
func RedisCommand(addr string, args ...string) (string, error) {
	return redisDo(addr, nil, nil, args)
}

// redisDo dials addr (over TLS with tlsConf), sends AUTH auth... first when
// auth is set, then args, and returns the reply to args.
func redisDo(addr string, tlsConf *tls.Config, auth, args []string) (string, error) {
	d := &net.Dialer{Timeout: time.Second}
	var conn net.Conn
	var err error
	if tlsConf != nil {
		conn, err = tls.DialWithDialer(d, "tcp", addr, tlsConf)
	} else {
		conn, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	if len(auth) > 0 {
		if _, err := send(conn, r, append([]string{"AUTH"}, auth...)); err != nil {
			return "", err
		}
	}
	return send(conn, r, args)
}

// send writes one command and reads its reply.
func send(conn net.Conn, r *bufio.Reader, args []string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"), strings.HasPrefix(line, ":"):
		return line[1:], nil
	case strings.HasPrefix(line, "-"):
		return "", fmt.Errorf("redis: %s", line[1:])
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return line, nil
	}
}
