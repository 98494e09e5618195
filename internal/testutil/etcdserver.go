package testutil

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/internal/poll"
)

// EtcdCluster is a throwaway etcd cluster started by a test from the
// installed etcd binary (Debian's etcd-server), its members on free
// loopback ports with their data in temporary directories. Every member is
// killed when the test ends.
type EtcdCluster struct {
	// Members are the cluster's members, in start order.
	Members []*EtcdMember
}

// EtcdMember is one member of an EtcdCluster.
type EtcdMember struct {
	// Name is the member's name (m0, m1, ...).
	Name string
	// ClientAddr is the member's client address, "127.0.0.1:port".
	ClientAddr string

	t    testing.TB
	dir  string
	args []string
	mu   sync.Mutex
	cmd  *exec.Cmd
}

// Endpoints returns every member's client address.
func (c *EtcdCluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.ClientAddr
	}
	return eps
}

// StartEtcd starts an etcd cluster of n members (1 or 3) with a short
// heartbeat (50 ms) and election timeout (500 ms), so that a leader is
// replaced within about a second, and waits until every member is healthy.
// The test fails when the binary is missing or the cluster does not come up
// within 20 s.
func StartEtcd(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Fatalf("etcd binary not found (scripts/stores.sh installs etcd-server): %v", err)
	}
	c := &EtcdCluster{}
	peers := make([]string, n)
	clients := make([]int, n)
	for i := range n {
		clients[i] = FreePort(t)
		peers[i] = fmt.Sprintf("m%d=http://127.0.0.1:%d", i, FreePort(t))
	}
	for i := range n {
		name, peerURL, _ := strings.Cut(peers[i], "=")
		clientURL := "http://127.0.0.1:" + strconv.Itoa(clients[i])
		dir := t.TempDir()
		m := &EtcdMember{
			Name:       name,
			ClientAddr: "127.0.0.1:" + strconv.Itoa(clients[i]),
			t:          t,
			dir:        dir,
			args: []string{
				"--name", name, "--data-dir", filepath.Join(dir, "data"),
				"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
				"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
				"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-state", "new",
				"--initial-cluster-token", "mutexfx-" + strconv.Itoa(clients[0]),
				"--heartbeat-interval", "50", "--election-timeout", "500",
				"--logger", "zap", "--log-outputs", filepath.Join(dir, "etcd.log"),
			},
		}
		t.Cleanup(m.Kill)
		m.start()
		c.Members = append(c.Members, m)
	}
	for _, m := range c.Members {
		m.waitHealthy(20 * time.Second)
	}
	return c
}

func (m *EtcdMember) start() {
	m.t.Helper()
	cmd := exec.Command("etcd", m.args...)
	if err := cmd.Start(); err != nil {
		m.t.Fatalf("start etcd %s: %v", m.Name, err)
	}
	m.mu.Lock()
	m.cmd = cmd
	m.mu.Unlock()
}

// waitHealthy polls the member's /health endpoint until it reports a
// leader and a working store.
func (m *EtcdMember) waitHealthy(d time.Duration) {
	m.t.Helper()
	cl := &http.Client{Timeout: time.Second}
	if !poll.Until(d, 50*time.Millisecond, func() bool {
		resp, err := cl.Get("http://" + m.ClientAddr + "/health")
		if err != nil {
			return false
		}
		var b [256]byte
		k, _ := resp.Body.Read(b[:])
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b[:k]), `"true"`)
	}) {
		m.t.Fatalf("etcd %s on %s is not healthy after %v; log:\n%s", m.Name, m.ClientAddr, d, m.Log())
	}
}

// Log returns the member's log (for failure messages), its last 8 KB.
func (m *EtcdMember) Log() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "etcd.log"))
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(b)
}

// Kill kills the member (SIGKILL, resuming it first if paused) and waits
// for it to exit. Its data stays for Restart.
func (m *EtcdMember) Kill() {
	m.mu.Lock()
	cmd := m.cmd
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// Restart starts a killed member again on its ports with its data, and
// waits until it is healthy.
func (m *EtcdMember) Restart() {
	m.t.Helper()
	m.Kill()
	for i, a := range m.args {
		if a == "--initial-cluster-state" {
			m.args[i+1] = "existing"
		}
	}
	m.start()
	m.waitHealthy(20 * time.Second)
}

// Pause stops the member with SIGSTOP: it keeps its sockets but answers
// nothing until Resume.
func (m *EtcdMember) Pause() { m.signal(sigStop) }

// Resume continues a paused member (SIGCONT).
func (m *EtcdMember) Resume() { m.signal(sigCont) }

func (m *EtcdMember) signal(sig syscall.Signal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	if err := m.cmd.Process.Signal(sig); err != nil {
		m.t.Errorf("signal %v to etcd %s: %v", sig, m.Name, err)
	}
}
