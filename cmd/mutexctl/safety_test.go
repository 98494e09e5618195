//go:build unix

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// promptWriter records what is written and closes asked once the
// confirmation prompt of release has been written.
type promptWriter struct {
	mu    sync.Mutex
	b     bytes.Buffer
	once  sync.Once
	asked chan struct{}
}

func (w *promptWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	if strings.Contains(w.b.String(), "[y/N]") {
		w.once.Do(func() { close(w.asked) })
	}
	return n, err
}

func (w *promptWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestReleaseLeavesNewHolder: the operator confirms breaking the lock of
// the holder shown; if the lock changed holder while the prompt waited,
// the new holder's lock is left alone (exit 1).
func TestReleaseLeavesNewHolder(t *testing.T) {
	for _, s := range stores() {
		if !s.expiring {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			cfg := writeConfig(t, s.driver(t))
			app := openApp(t, cfg)
			if r := ctl(t, "", "release", "job", "--config", cfg, "--force", "--yes"); r.code != 0 || strings.TrimSpace(r.stdout) != "free" {
				t.Fatalf("release of a free lock: %+v, want exit 0 and free", r)
			}
			first, err := app.Acquire(t.Context(), "job")
			if err != nil {
				t.Fatal(err)
			}
			in, answer := io.Pipe()
			out := &promptWriter{asked: make(chan struct{})}
			var errb syncBuffer
			done := make(chan int, 1)
			go func() {
				done <- Main(t.Context(), []string{"release", "job", "--config", cfg, "--force"}, in, out, &errb)
			}()
			<-out.asked
			if _, err := first.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			second, err := app.Acquire(t.Context(), "job")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(answer, "y\n"); err != nil {
				t.Fatal(err)
			}
			code := <-done
			_ = answer.Close()
			if code != ExitError || !strings.Contains(errb.String(), "changed holder") {
				t.Errorf("release confirmed for the first holder: exit %d, %s%s; want exit %d", code, out, errb.String(), ExitError)
			}
			if err := second.Err(); err != nil {
				t.Fatalf("the new holder's lock was broken: %v", err)
			}
			st, held, err := app.Inspect(t.Context(), "job")
			if err != nil || !held || st.Fence != second.Fence() {
				t.Fatalf("after the refused release: %+v held %v: %v; want the new holder's fence %d", st, held, err, second.Fence())
			}
		})
	}
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// silentAddr returns a loopback address that accepts connections and
// never answers, as a hung server; it closes them at the test's end.
func silentAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// TestRunStoreDownIsNotTimeout: when the store cannot be reached, run exits
// 1 (a store error), not 75 (the lock is held elsewhere), so that
// `|| [ $? -eq 75 ]` does not hide an outage.
func TestRunStoreDownIsNotTimeout(t *testing.T) {
	down := map[string]string{
		"redis-refused": "type: redis\n      addrs: [" + fmt.Sprintf("%q", closedAddr(t)) + "]",
		"redis-silent":  "type: redis\n      addrs: [" + fmt.Sprintf("%q", silentAddr(t)) + "]",
		"mysql-silent":  "type: mysql\n      dsn: " + fmt.Sprintf("%q", "root@tcp("+silentAddr(t)+")/test") + "\n      mode: table",
	}
	for name, driver := range down {
		t.Run(name, func(t *testing.T) {
			cfg := writeConfig(t, driver)
			for _, timeout := range []string{"0", "300ms"} {
				r := ctl(t, "", "run", "job", "--config", cfg, "--timeout", timeout, "--", "true")
				if r.code != ExitError || !strings.Contains(r.stderr, `store "main"`) {
					t.Errorf("run --timeout %s on an unreachable store: %+v; want exit %d naming the store", timeout, r, ExitError)
				}
			}
		})
	}
}

// TestStoreDownBounded: list, inspect and release on a store that accepts
// connections and never answers fail within --store-timeout, with exit 1.
func TestStoreDownBounded(t *testing.T) {
	cfg := writeConfig(t, "type: mysql\n      dsn: "+fmt.Sprintf("%q", "root@tcp("+silentAddr(t)+")/test")+"\n      mode: table")
	for _, a := range [][]string{
		{"list"},
		{"inspect", "job"},
		{"release", "job", "--force", "--yes"},
	} {
		start := time.Now()
		r := ctl(t, "", append(a, "--config", cfg, "--store-timeout", "500ms")...)
		if took := time.Since(start); r.code != ExitError || took > 5*time.Second {
			t.Errorf("mutexctl %s on a hung store: %+v after %v; want exit %d within 5s", a[0], r, took, ExitError)
		}
	}
}

// TestMemoryStoreRefused: a memory store (no store configured under
// --path, as with a wrong --path or a file of another application, or
// driver: memory) is private to mutexctl: every command refuses it rather
// than show every lock free or run a command under a lock nobody else sees.
func TestMemoryStoreRefused(t *testing.T) {
	cfg := writeConfig(t, "type: file\n      dir: "+fmt.Sprintf("%q", t.TempDir()))
	mem := writeConfig(t, "type: memory")
	for _, c := range []struct{ cfg, path string }{{cfg, "mutexes"}, {mem, "mutex"}} {
		for _, a := range [][]string{
			{"list"},
			{"inspect", "job"},
			{"release", "job", "--force", "--yes"},
			{"run", "job", "--", "true"},
		} {
			r := ctl(t, "", append([]string{"--config", c.cfg, "--path", c.path}, a...)...)
			if r.code != ExitError || !strings.Contains(r.stderr, "memory store") {
				t.Errorf("mutexctl %s --path %s: %+v; want exit %d refusing the memory store", a[0], c.path, r, ExitError)
			}
		}
	}
}

// TestRunLostLockFails: a command that exits 0 after its lock was broken
// did not run alone to its end: run exits 1.
func TestRunLostLockFails(t *testing.T) {
	cfg := writeConfig(t, "type: redis\n      addrs: ["+fmt.Sprintf("%q", testutil.RedisAddr())+"]")
	pr, pw := io.Pipe()
	var errb syncBuffer
	done := make(chan int, 1)
	go func() {
		defer pw.Close()
		script := `trap 'echo got-term; exit 0' TERM; echo started; while :; do sleep 0.05; done`
		done <- Main(t.Context(), []string{"run", "job", "--config", cfg, "--ttl", "1500ms", "--", "sh", "-c", script}, strings.NewReader(""), pw, &errb)
	}()
	buf := make([]byte, len("started\n"))
	if _, err := io.ReadFull(pr, buf); err != nil || string(buf) != "started\n" {
		t.Fatalf("command did not start: %q %v %s", buf, err, errb.String())
	}
	if r := ctl(t, "", "release", "job", "--config", cfg, "--force", "--yes"); r.code != 0 {
		t.Fatalf("release: %+v", r)
	}
	_, _ = io.Copy(io.Discard, pr)
	if code := <-done; code != ExitError || !strings.Contains(errb.String(), "lost") {
		t.Fatalf("run whose lock was lost, command exiting 0: exit %d, %s; want %d", code, errb.String(), ExitError)
	}
}

// TestEnvOverridesFile: MUTEXFX_* variables override the file's keys
// (here the store's prefix, so that the lock held under the file's prefix
// is not the one inspected).
func TestEnvOverridesFile(t *testing.T) {
	cfg := writeConfig(t, "type: file\n      dir: "+fmt.Sprintf("%q", t.TempDir()))
	if _, err := openApp(t, cfg).Acquire(t.Context(), "job"); err != nil {
		t.Fatal(err)
	}
	if r := ctl(t, "", "inspect", "job", "--config", cfg); r.code != 0 || !strings.Contains(r.stdout, "holder:") {
		t.Fatalf("inspect of the held lock: %+v", r)
	}
	t.Setenv("MUTEXFX_MUTEX__MAIN__PREFIX", "other:")
	if r := ctl(t, "", "inspect", "job", "--config", cfg); r.code != 0 || strings.TrimSpace(r.stdout) != "free" {
		t.Fatalf("inspect under the prefix of the environment: %+v, want free", r)
	}
	t.Setenv("MUTEXFX_MUTEX__MAIN__RETRY_DELAY", "1s")
	if r := ctl(t, "", "inspect", "job", "--config", cfg); r.code != ExitError || !strings.Contains(r.stderr, `mutex.main.retry_delay: unknown key: did you mean "retryDelay"?`) {
		t.Fatalf("snake_case key from the environment: %+v", r)
	}
}

// TestRunSignals: a signal mutexctl gets reaches the command, and a command
// killed by signal N makes run exit 128+N.
func TestRunSignals(t *testing.T) {
	cfg := writeConfig(t, "type: file\n      dir: "+fmt.Sprintf("%q", t.TempDir()))
	if r := ctl(t, "", "run", "job", "--config", cfg, "--", "sh", "-c", "kill -KILL $$"); r.code != 128+9 {
		t.Fatalf("command killed by SIGKILL: %+v, want exit %d", r, 128+9)
	}
	pr, pw := io.Pipe()
	var errb syncBuffer
	done := make(chan int, 1)
	go func() {
		defer pw.Close()
		script := `trap 'echo got-usr1; exit 4' USR1; echo started; while :; do sleep 0.05; done`
		done <- Main(t.Context(), []string{"run", "job", "--config", cfg, "--", "sh", "-c", script}, strings.NewReader(""), pw, &errb)
	}()
	lines := bufio.NewScanner(pr)
	if !lines.Scan() || lines.Text() != "started" {
		t.Fatalf("command did not start: %q %s", lines.Text(), errb.String())
	}
	// run catches SIGUSR1 from before the command starts
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() || lines.Text() != "got-usr1" {
		t.Fatalf("signal not forwarded: %q %s", lines.Text(), errb.String())
	}
	_, _ = io.Copy(io.Discard, pr)
	if code := <-done; code != 4 {
		t.Fatalf("run exit %d, want the command's 4: %s", code, errb.String())
	}
}

// TestRunBadFlags: a --ttl the store refuses and a negative --grace are
// bad flags (exit 64), named in the message.
func TestRunBadFlags(t *testing.T) {
	cfg := writeConfig(t, "type: file\n      dir: "+fmt.Sprintf("%q", t.TempDir()))
	for _, c := range []struct{ flag, value string }{{"--ttl", "1ms"}, {"--grace", "-1s"}} {
		r := ctl(t, "", "run", "job", "--config", cfg, c.flag, c.value, "--", "true")
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.flag) {
			t.Errorf("run %s %s: %+v; want exit %d naming %s", c.flag, c.value, r, ExitUsage, c.flag)
		}
	}
}

// TestTerminalWaitRetriesStore: on a terminal, run's first try tells who
// holds the lock; a store error at that try does not end the wait, which
// goes on retrying the store until --timeout as it does off a terminal
// (the error is then a timeout after store failures, not the first
// failure).
func TestTerminalWaitRetriesStore(t *testing.T) {
	tty, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0) // a character device, as a terminal is
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	if !isTerminal(tty) {
		t.Fatalf("%s is not a character device here", os.DevNull)
	}
	m := openApp(t, writeConfig(t, "type: redis\n      addrs: ["+fmt.Sprintf("%q", closedAddr(t))+"]"))
	l, err := acquire(t.Context(), m, "job", []component.AcquireOption{component.WithTimeout(300 * time.Millisecond)}, tty)
	if l != nil || !errors.Is(err, component.ErrTimeout) || !errors.Is(err, component.ErrDriver) {
		t.Fatalf("acquire on a refused store from a terminal = %v, %v; want a timeout after store failures", l, err)
	}
}
