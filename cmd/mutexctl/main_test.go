//go:build unix

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	"go.uber.org/goleak"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/drivers/etcd"
	"github.com/mutexfx/mutexfx/drivers/mysql"
	"github.com/mutexfx/mutexfx/drivers/postgres"
	"github.com/mutexfx/mutexfx/drivers/redis"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// store is one store configuration the tests run mutexctl against.
type store struct {
	name string
	// driver is the YAML of the store's driver, indented for the store.
	driver func(t *testing.T) string
	// enumerable: the store can list its locks; holderKnown: it tells the
	// holder of another process's lock; expiring: it keeps the token, so
	// that a lock can be force-released.
	enumerable, holderKnown, expiring bool
}

func stores() []store {
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	return []store{
		{"redis", func(*testing.T) string {
			return "type: redis\n      addrs: [" + q(testutil.RedisAddr()) + "]"
		}, true, true, true},
		{"file", func(t *testing.T) string { return "type: file\n      dir: " + q(t.TempDir()) }, true, true, true},
		{"postgres-table", func(*testing.T) string {
			return "type: postgres\n      url: " + q(testutil.PostgresDSN()) + "\n      mode: table"
		}, true, true, true},
		{"postgres-advisory", func(*testing.T) string {
			return "type: postgres\n      url: " + q(testutil.PostgresDSN()) + "\n      mode: advisory"
		}, false, true, false},
		{"mysql-table", func(*testing.T) string {
			return "type: mysql\n      dsn: " + q(testutil.MySQLDSN()) + "\n      mode: table"
		}, true, true, true},
		{"mysql-advisory", func(*testing.T) string {
			return "type: mysql\n      dsn: " + q(testutil.MySQLDSN()) + "\n      mode: advisory"
		}, false, true, false},
		{"etcd", func(t *testing.T) string { // a throwaway single-member cluster
			return "type: etcd\n      endpoints: [" + q(testutil.StartEtcd(t, 1).Endpoints()[0]) + "]"
		}, false, true, true},
	}
}

// writeConfig writes a configuration with the store "main" (default) of
// driver d, under a fresh prefix, and returns its path.
func writeConfig(t *testing.T, driver string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.yaml")
	prefix := "mutexctl-" + rand.Text()[:10] + ":"
	cfg := fmt.Sprintf("mutex:\n  main:\n    default: true\n    prefix: %q\n    ttl: 3s\n    driver:\n      %s\n", prefix, driver)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// openApp builds the stores of the configuration as an application would.
func openApp(t *testing.T, path string) *mutexfx.Mutex {
	t.Helper()
	k := koanf.New(".")
	if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
		t.Fatal(err)
	}
	reg, err := mutexfx.Open(k, mutexfx.WithDrivers(redis.Factory(), postgres.Factory(), mysql.Factory(), etcd.Factory()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close(context.Background()) })
	m, err := reg.Default()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// result is one mutexctl invocation's outcome.
type result struct {
	code           int
	stdout, stderr string
}

func ctl(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb syncBuffer
	code := Main(t.Context(), args, strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// syncBuffer is a bytes.Buffer safe for the writes of a command's output
// copier and the reads of a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
