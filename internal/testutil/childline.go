package testutil

import (
	"bufio"
	"os/exec"
	"testing"
)

// StartChild starts cmd (from Child) and returns the first line it
// writes to its stdout, with its newline: a child announces so that it is
// ready (holds its lock). It fails t when the child cannot start or ends
// before it writes a line.
func StartChild(t testing.TB, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	return line
}
