//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestListInspectShowHolder(t *testing.T) {
	host, _ := os.Hostname()
	pid := strconv.Itoa(os.Getpid())
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			cfg := writeConfig(t, s.driver(t))
			if r := ctl(t, "", "inspect", "--config", cfg, "job"); r.code != 0 || strings.TrimSpace(r.stdout) != "free" {
				t.Fatalf("inspect of a free lock: %+v", r)
			}
			l, err := openApp(t, cfg).Acquire(t.Context(), "job")
			if err != nil {
				t.Fatal(err)
			}
			r := ctl(t, "", "inspect", "--config", cfg, "--json", "job")
			var v lockView
			if err := json.Unmarshal([]byte(r.stdout), &v); r.code != 0 || err != nil {
				t.Fatalf("inspect --json: %+v: %v", r, err)
			}
			if !v.Held {
				t.Fatalf("inspect of a held lock: %+v", v)
			}
			if s.holderKnown && (v.Host != host || strconv.Itoa(v.PID) != pid) ||
				s.expiring && (v.Fence != l.Fence() || v.AcquiredAt == nil) {
				t.Fatalf("inspect: %+v; want host %s pid %s fence %d", v, host, pid, l.Fence())
			}
			r = ctl(t, "", "inspect", "--config", cfg, "job")
			if s.holderKnown && (r.code != 0 || !strings.Contains(r.stdout, "@"+host+":"+pid)) {
				t.Fatalf("inspect: %+v", r)
			}
			r = ctl(t, "", "list", "--config", cfg)
			if !s.enumerable {
				if r.code != ExitError || !strings.Contains(r.stderr, "not supported") {
					t.Fatalf("list on a store that cannot enumerate: %+v", r)
				}
				return
			}
			if r.code != 0 || !strings.Contains(r.stdout, `"job"`) || !strings.Contains(r.stdout, "@"+host+":"+pid) {
				t.Fatalf("list: %+v", r)
			}
			var vs []lockView
			r = ctl(t, "", "list", "--config", cfg, "--json")
			if err := json.Unmarshal([]byte(r.stdout), &vs); err != nil || len(vs) != 1 || vs[0].Name != "job" || vs[0].Host != host {
				t.Fatalf("list --json: %+v: %v", r, err)
			}
		})
	}
}

func TestRunPassesExitCodes(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			cfg := writeConfig(t, s.driver(t))
			r := ctl(t, "", "run", "job", "--config", cfg, "--", "sh", "-c", `echo "$MUTEXFX_LOCK $MUTEXFX_FENCE"; exit 7`)
			if r.code != 7 || !strings.HasPrefix(r.stdout, "job ") {
				t.Fatalf("run: %+v, want exit 7 and the lock in the environment", r)
			}
			if r := ctl(t, "", "run", "job", "--config", cfg, "--", "true"); r.code != 0 {
				t.Fatalf("run true: %+v", r)
			}
			if _, err := openApp(t, cfg).Acquire(t.Context(), "job"); err != nil {
				t.Fatal(err)
			}
			for _, timeout := range []string{"200ms", "0"} { // 0: one attempt
				r = ctl(t, "", "run", "job", "--config", cfg, "--timeout", timeout, "--", "true")
				if r.code != ExitTimeout {
					t.Fatalf("run --timeout %s on a held lock: %+v, want exit %d", timeout, r, ExitTimeout)
				}
			}
		})
	}
}

func TestConcurrentRunsSerialise(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			cfg := writeConfig(t, s.driver(t))
			log := filepath.Join(t.TempDir(), "log")
			var wg sync.WaitGroup
			codes := make([]int, 3)
			for i := range codes {
				wg.Go(func() {
					script := `echo start >> "$1"; sleep 0.2; echo end >> "$1"`
					codes[i] = ctl(t, "", "run", "job", "--config", cfg, "--", "sh", "-c", script, "sh", log).code
				})
			}
			wg.Wait()
			b, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Repeat("start\nend\n", len(codes))
			if string(b) != want || codes[0]+codes[1]+codes[2] != 0 {
				t.Fatalf("runs overlapped or failed (codes %v):\n%s", codes, b)
			}
		})
	}
}

func TestForcedReleaseStopsRun(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			cfg := writeConfig(t, s.driver(t))
			if !s.expiring {
				if _, err := openApp(t, cfg).Acquire(t.Context(), "job"); err != nil {
					t.Fatal(err)
				}
				r := ctl(t, "", "release", "job", "--config", cfg, "--force", "--yes")
				if r.code != ExitError || !strings.Contains(r.stderr, "not supported") {
					t.Fatalf("release on an advisory store: %+v", r)
				}
				return
			}
			pr, pw := io.Pipe()
			var errb syncBuffer
			done := make(chan int, 1)
			go func() {
				defer pw.Close()
				script := `trap 'echo got-term; exit 3' TERM; echo started; while :; do sleep 0.05; done`
				done <- Main(t.Context(), []string{"run", "job", "--config", cfg, "--ttl", ttl.String(), "--", "sh", "-c", script}, strings.NewReader(""), pw, &errb)
			}()
			lines := bufio.NewScanner(pr)
			if !lines.Scan() || lines.Text() != "started" {
				t.Fatalf("command did not start: %q %s", lines.Text(), errb.String())
			}
			if r := ctl(t, "n\n", "release", "job", "--config", cfg, "--force"); r.code != ExitError {
				t.Fatalf("release answered no: %+v", r)
			}
			if r := ctl(t, "", "release", "job", "--config", cfg); r.code != ExitUsage {
				t.Fatalf("release without --force: %+v", r)
			}
			r := ctl(t, "", "release", "job", "--config", cfg, "--force", "--yes")
			start := time.Now()
			if r.code != 0 || !strings.Contains(r.stdout, "released") {
				t.Fatalf("release: %+v", r)
			}
			if !lines.Scan() || lines.Text() != "got-term" {
				t.Fatalf("command not told: %q %s", lines.Text(), errb.String())
			}
			if took, bound := time.Since(start), ttl/3+time.Second; took > bound {
				t.Errorf("SIGTERM %v after the release, want within %v", took, bound)
			}
			_, _ = io.Copy(io.Discard, pr)
			if code := <-done; code != 3 {
				t.Fatalf("run exit %d, want the command's 3: %s", code, errb.String())
			}
		})
	}
}
