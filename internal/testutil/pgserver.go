package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
)

// PGServer is a throwaway PostgreSQL cluster started by a test with initdb
// and pg_ctl on a free port, trust authentication, its unix socket in its
// own directory. It is stopped (immediate mode) and removed when the test
// ends. Stop and Start let fault tests take it down and back on the same
// port. As root, the cluster runs as the "postgres" user (PostgreSQL refuses
// root).
type PGServer struct {
	// Port is the server's TCP port on 127.0.0.1.
	Port int
	// DSN connects as postgres to database postgres over TCP.
	DSN string

	t    testing.TB
	bin  string
	dir  string
	data string
	asPG bool

	mu      sync.Mutex
	running bool
}

// StartPostgres creates and starts a cluster. The test fails when initdb or
// pg_ctl is missing or the server does not come up.
func StartPostgres(t testing.TB) *PGServer {
	t.Helper()
	bin, err := pgBin()
	if err != nil {
		t.Fatalf("PostgreSQL binaries not found (scripts/stores.sh installs them): %v", err)
	}
	dir, err := os.MkdirTemp("", "mutexfx-pg-")
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := &PGServer{t: t, bin: bin, dir: dir, data: filepath.Join(dir, "data"), asPG: os.Geteuid() == 0}
	if s.asPG {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs a postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatalf("chmod: %v", err)
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("chown: %v", err)
		}
	}
	s.run("initdb", "-D", s.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	s.Port = FreePort(t)
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
	t.Cleanup(s.Stop)
	s.Start()
	return s
}

// pgBin returns the directory of the newest installed initdb.
func pgBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	p, err := exec.LookPath("initdb")
	if err != nil {
		return "", err
	}
	return filepath.Dir(p), nil
}

// run runs a PostgreSQL program, as the postgres user when root.
func (s *PGServer) run(prog string, args ...string) {
	s.t.Helper()
	path := filepath.Join(s.bin, prog)
	var cmd *exec.Cmd
	if s.asPG {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("%s: %v\n%s", prog, err, out)
	}
}

// Start starts the server (again) and waits until it accepts connections.
func (s *PGServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", s.Port, s.dir)
	s.run("pg_ctl", "-D", s.data, "-l", filepath.Join(s.dir, "log"), "-w", "-t", "30", "-o", opts, "start")
	s.running = true
}

// Stop stops the server at once (immediate mode: no clean shutdown, as a
// crash). Idempotent.
func (s *PGServer) Stop() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return
	}
	s.run("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "-t", "30", "stop")
	s.running = false
}
