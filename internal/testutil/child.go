package testutil

import (
	"os"
	"os/exec"
	"testing"

	"go.uber.org/goleak"
)

// ChildEnv is the environment variable that tells a re-executed test binary
// which child role to play.
const ChildEnv = "MUTEXFX_TEST_CHILD"

// ChildRole returns the role this process was started with by Child, or "".
// A package's TestMain calls it and, when it is set, runs the role and exits
// instead of running the tests.
func ChildRole() string { return os.Getenv(ChildEnv) }

// Child returns a command re-executing the test binary in role, with extra
// environment variables ("K=V"). Its output goes to the test's stderr. The
// caller starts it; the process is killed when the test ends if still
// running.
func Child(t testing.TB, role string, env ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("executable: %v", err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), ChildEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	t.Cleanup(func() {
		if cmd.Process != nil && cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// InCI reports whether the tests run in CI (CI=true), where a store test that
// cannot reach its store must fail rather than skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Main is the TestMain of a package whose tests re-execute the test binary:
// a child plays the role it was started with (runChild returns its exit
// code); otherwise the tests run under goleak.
func Main(m *testing.M, runChild func(role string) int) {
	if role := ChildRole(); role != "" {
		os.Exit(runChild(role))
	}
	goleak.VerifyTestMain(m)
}
