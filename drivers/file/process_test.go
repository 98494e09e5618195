//go:build linux

package file_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// holdChild is a child process holding a lock.
type holdChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
	fence uint64
}

// startHolder starts a child that takes key with ttl and waits for it to hold.
func startHolder(t *testing.T, dir, key string, ttl time.Duration) *holdChild {
	t.Helper()
	cmd := testutil.Child(t, roleHold, envDir+"="+dir, envKey+"="+key, envTTL+"="+ttl.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &holdChild{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	line := c.line(t)
	f, ok := strings.CutPrefix(line, "held ")
	if !ok {
		t.Fatalf("child said %q, want held", line)
	}
	if c.fence, err = strconv.ParseUint(f, 10, 64); err != nil {
		t.Fatal(err)
	}
	return c
}

// line reads the child's next output line.
func (c *holdChild) line(t *testing.T) string {
	t.Helper()
	if !c.out.Scan() {
		t.Fatalf("child output ended: %v", c.out.Err())
	}
	return c.out.Text()
}

// signal sends sig to the child.
func (c *holdChild) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// TestKilledHolder: a holder killed with SIGKILL, holding a lock for an hour,
// has its lock taken over at once, with the next fence.
func TestKilledHolder(t *testing.T) {
	dir := t.TempDir()
	c := startHolder(t, dir, "k", time.Hour)
	d := newDriver(t, dir)
	res := acquire(t, d, "k", "parent", time.Minute)
	if res.Acquired || res.HolderTTL < 59*time.Minute {
		t.Fatalf("Acquire while the child holds: %+v, want busy for about an hour", res)
	}
	if info, ok, err := d.Inspect(ctxT(t), "k"); err != nil || !ok || info.Fence != c.fence || !strings.HasPrefix(info.Token, "child-") {
		t.Fatalf("Inspect: %+v, %v, %v", info, ok, err)
	}
	c.signal(t, syscall.SIGKILL)
	_ = c.cmd.Wait()
	start := time.Now()
	res = acquire(t, d, "k", "parent", time.Minute)
	if !res.Acquired || res.Fence != c.fence+1 {
		t.Fatalf("Acquire after kill -9: %+v, want acquired with fence %d", res, c.fence+1)
	}
	t.Logf("taken over %v after the holder's death (its ttl: 1h)", time.Since(start))
}

// TestKilledHolderWakesWaiter: a Mutex in this process waiting for a lock
// held by another process is woken by the holder's death (inotify sees the
// kernel close its descriptor), long before its next poll.
func TestKilledHolderWakesWaiter(t *testing.T) {
	dir := t.TempDir()
	c := startHolder(t, dir, "wake:k", time.Hour)
	m, err := component.New(component.Options{Driver: newDriver(t, dir), Prefix: "wake:", RetryDelay: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Close(ctxT(t)) }()
	got := make(chan time.Time, 1)
	var lockErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		l, err := m.Acquire(ctxT(t), "k", component.WithTimeout(30*time.Second))
		lockErr = err
		if err == nil {
			got <- time.Now()
			_, _ = l.Release(ctxT(t))
		}
	})
	// The waiter's first attempt found the lock held (and started watching)
	// once it waits in its queue for a minute-long retry delay.
	testutil.Poll(t, 5*time.Second, "the waiter's first attempt", func() bool {
		return m.Waiters("k") == 1 && dirHasWatch(t)
	})
	c.signal(t, syscall.SIGKILL)
	killed := time.Now()
	_ = c.cmd.Wait()
	wg.Wait()
	if lockErr != nil {
		t.Fatalf("Acquire: %v", lockErr)
	}
	if el := (<-got).Sub(killed); el > 5*time.Second {
		t.Fatalf("woken %v after the kill, want at once", el)
	} else {
		t.Logf("woken %v after the kill (retry delay: 1m)", el)
	}
}

// dirHasWatch reports whether this process has an inotify descriptor.
func dirHasWatch(t *testing.T) bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.Contains(target, "inotify") {
			return true
		}
	}
	return false
}

// TestStoppedHolder: a holder stopped with SIGSTOP (alive but hung) keeps its
// lock until its ttl, then loses it; resumed, it can no longer release it.
func TestStoppedHolder(t *testing.T) {
	dir := t.TempDir()
	const ttl = 400 * time.Millisecond
	c := startHolder(t, dir, "k", ttl)
	c.signal(t, syscall.SIGSTOP)
	d := newDriver(t, dir)
	asked := time.Now()
	res := acquire(t, d, "k", "parent", time.Minute)
	if res.Acquired || res.HolderTTL <= 0 || res.HolderTTL > ttl {
		t.Fatalf("Acquire while the child holds: %+v, want busy for at most %v", res, ttl)
	}
	// The lock expires no earlier than asked+HolderTTL (the answer came
	// after asked): a take before that would be before its expiry. This
	// bound holds however late the child's "held" reached the parent.
	expires := asked.Add(res.HolderTTL)
	testutil.Poll(t, ttl+5*time.Second, "the stopped holder's lock to expire", func() bool {
		res = acquire(t, d, "k", "parent", time.Minute)
		return res.Acquired
	})
	if res.Fence != c.fence+1 {
		t.Fatalf("Acquire after the ttl: %+v, want acquired with fence %d", res, c.fence+1)
	}
	if early := time.Until(expires); early > 0 {
		t.Fatalf("taken %v before the stopped holder's lock expired (ttl %v)", early, ttl)
	}
	c.signal(t, syscall.SIGCONT)
	_ = c.stdin.Close()
	if line := c.line(t); line != "released false" {
		t.Fatalf("resumed child: %q, want released false", line)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if info, ok, err := d.Inspect(ctxT(t), "k"); err != nil || !ok || info.Token != "parent" {
		t.Fatalf("Inspect: %+v, %v, %v", info, ok, err)
	}
}

// TestCrossProcessWakeUp: a subscriber is told when another process releases
// a lock this driver found held.
func TestCrossProcessWakeUp(t *testing.T) {
	dir := t.TempDir()
	c := startHolder(t, dir, "k", time.Hour)
	d := newDriver(t, dir)
	events := make(chan drivers.Event, 16)
	cancel, err := d.Subscribe(ctxT(t), func(e drivers.Event) { events <- e })
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if acquire(t, d, "k", "parent", time.Minute).Acquired {
		t.Fatal("acquired while the child holds")
	}
	_ = c.stdin.Close()
	if line := c.line(t); line != "released true" {
		t.Fatalf("child: %q", line)
	}
	select {
	case e := <-events:
		if e.Kind != drivers.Released || e.Key != "k" {
			t.Fatalf("event %+v, want released k", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up for the other process's release")
	}
	if !acquire(t, d, "k", "parent", time.Minute).Acquired {
		t.Fatal("not acquired after the wake-up")
	}
}

// TestProcessesContend: processes taking one lock in turn never overlap
// and get strictly growing fences.
func TestProcessesContend(t *testing.T) {
	const procs, rounds = 4, 40
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(out, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmds := make([]*exec.Cmd, procs)
	for i := range cmds {
		cmds[i] = testutil.Child(t, roleContend, envDir+"="+dir, envKey+"=shared", envOut+"="+out, envRounds+"="+strconv.Itoa(rounds))
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 2*procs*rounds {
		t.Fatalf("%d lines, want %d", len(lines), 2*procs*rounds)
	}
	var last uint64
	perPID := map[string]int{}
	for i := 0; i < len(lines); i += 2 {
		var bTag, eTag, bPID, ePID string
		var bFence, eFence uint64
		if _, err := fmt.Sscan(lines[i], &bTag, &bPID, &bFence); err != nil {
			t.Fatalf("line %d %q: %v", i, lines[i], err)
		}
		if _, err := fmt.Sscan(lines[i+1], &eTag, &ePID, &eFence); err != nil {
			t.Fatalf("line %d %q: %v", i+1, lines[i+1], err)
		}
		if bTag != "B" || eTag != "E" || bPID != ePID || bFence != eFence {
			t.Fatalf("lines %d-%d interleave: %q, %q", i, i+1, lines[i], lines[i+1])
		}
		if bFence <= last {
			t.Fatalf("line %d: fence %d after %d", i, bFence, last)
		}
		last = bFence
		perPID[bPID]++
	}
	if len(perPID) != procs {
		t.Fatalf("sections by %d processes, want %d", len(perPID), procs)
	}
	t.Logf("%d critical sections by %d processes, fences up to %d", procs*rounds, procs, last)
}
