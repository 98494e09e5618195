package testutil

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// StartHolder re-executes the test binary in role (Child) and returns once
// the child printed its first line, which it does when it holds its lock:
// the line, trimmed. The process is killed when the test ends if still
// running.
func StartHolder(t testing.TB, role string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := Child(t, role, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child said %q: %v", line, err)
	}
	return cmd, strings.TrimSpace(line)
}

// KillHolder kills cmd with SIGKILL, waits for it to end and returns when
// it was killed.
func KillHolder(t testing.TB, cmd *exec.Cmd) time.Time {
	t.Helper()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = cmd.Wait()
	return killed
}
