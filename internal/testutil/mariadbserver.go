package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/internal/poll"
)

// MariaDB is a throwaway mariadbd for tests that kill, stop or restart a
// server: its own data directory in a temporary directory, a free port on
// 127.0.0.1, its own socket and pid file, no grant tables (root without
// password), killed when the test ends. Creating one takes about two
// seconds (mariadb-install-db), starting it well under a second: tests
// share one where they can.
type MariaDB struct {
	// Port is the server's TCP port on 127.0.0.1.
	Port int

	t   testing.TB
	dir string
	cmd *exec.Cmd
}

// mariadbd is the server binary.
const mariadbd = "/usr/sbin/mariadbd"

// StartMariaDB creates and starts a throwaway server with a database
// "test". A missing binary fails the test.
func StartMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	if _, err := os.Stat(mariadbd); err != nil {
		t.Fatalf("mariadb: %v (install mariadb-server; scripts/stores.sh does)", err)
	}
	dir, err := os.MkdirTemp("", "mutexfx-mariadb-")
	if err != nil {
		t.Fatalf("mariadb: %v", err)
	}
	m := &MariaDB{Port: FreePort(t), t: t, dir: dir}
	t.Cleanup(func() {
		m.Kill()
		os.RemoveAll(dir)
	})
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+m.datadir(),
		"--user="+currentUser(), "--auth-root-authentication-method=normal", "--skip-test-db",
		"--skip-name-resolve", "--innodb-log-file-size=8M")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	if err := os.Mkdir(filepath.Join(m.datadir(), "test"), 0o755); err != nil {
		t.Fatalf("mariadb: create database test: %v", err)
	}
	m.Start()
	return m
}

// DSN is the go-sql-driver DSN of database test on the server.
func (m *MariaDB) DSN() string { return fmt.Sprintf("root@tcp(127.0.0.1:%d)/test", m.Port) }

// Addr is "127.0.0.1:port".
func (m *MariaDB) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.Port)) }

func (m *MariaDB) datadir() string { return filepath.Join(m.dir, "data") }

// Start starts the (stopped) server and waits until it accepts
// connections.
func (m *MariaDB) Start() {
	m.t.Helper()
	if m.cmd != nil {
		m.t.Fatalf("mariadb: already running")
	}
	cmd := exec.Command(mariadbd, "--no-defaults",
		"--datadir="+m.datadir(), "--user="+currentUser(),
		"--port="+strconv.Itoa(m.Port), "--bind-address=127.0.0.1",
		"--socket="+filepath.Join(m.dir, "mysqld.sock"), "--pid-file="+filepath.Join(m.dir, "mysqld.pid"),
		"--log-error="+filepath.Join(m.dir, "error.log"),
		"--skip-grant-tables", "--skip-name-resolve", "--skip-log-bin",
		"--performance-schema=OFF", "--innodb-buffer-pool-size=32M", "--innodb-log-file-size=8M")
	if err := cmd.Start(); err != nil {
		m.t.Fatalf("mariadbd: %v", err)
	}
	m.cmd = cmd
	var err error
	if !poll.Until(30*time.Second, 20*time.Millisecond, func() bool {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", m.Addr(), time.Second); err == nil {
			c.Close()
		}
		return err == nil
	}) {
		log, _ := os.ReadFile(filepath.Join(m.dir, "error.log"))
		m.t.Fatalf("mariadbd does not answer on %s: %v\n%s", m.Addr(), err, log)
	}
}

// Kill kills the server with SIGKILL (a crash: nothing is flushed, every
// connection drops) and waits for it to exit. It does nothing when the
// server is not running.
func (m *MariaDB) Kill() {
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Kill()
	_ = m.cmd.Wait()
	m.cmd = nil
}

// Restart kills the server and starts it again on the same port and data.
func (m *MariaDB) Restart() {
	m.t.Helper()
	m.Kill()
	m.Start()
}

func currentUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Geteuid())
}
