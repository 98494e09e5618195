//go:build linux

package file_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/file"
)

// TestFlockSuite runs this package's whole suite (conformance, faults,
// killed and stopped child processes) again with MechanismFlock, the
// mechanism of macOS and the BSDs, in a child test binary: none of its tests
// may fail or skip.
func TestFlockSuite(t *testing.T) {
	if os.Getenv(envMechanism) != "" {
		t.Fatalf("%s set: the suite already runs with one mechanism", envMechanism)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-test.skip=^TestFlockSuite$", "-test.count=1", "-test.v"}
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(d).Round(time.Second).String())
	}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.CommandContext(t.Context(), exe, args...)
	cmd.Env = append(os.Environ(), envMechanism+"="+string(file.MechanismFlock))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("suite with flock: %v\n%s", err, out)
	}
	if skips := regexp.MustCompile(`(?m)^\s*--- SKIP: .*$`).FindAll(out, -1); len(skips) > 0 {
		t.Fatalf("suite with flock skipped tests:\n%s", bytes.Join(skips, []byte("\n")))
	}
	passed := regexp.MustCompile(`(?m)^--- PASS: `).FindAll(out, -1)
	if len(passed) == 0 {
		t.Fatalf("suite with flock ran no test:\n%s", out)
	}
	t.Logf("suite with flock: %d top-level tests passed", len(passed))
}

// TestMechanismsMixed: OFD locks and flock do not exclude each other, so a
// driver finding a lock held through the other mechanism fails with
// ErrMechanism instead of taking it; a free lock file is taken by either.
func TestMechanismsMixed(t *testing.T) {
	mechs := []file.Mechanism{file.MechanismOFD, file.MechanismFlock}
	for i, holderMech := range mechs {
		other := mechs[1-i]
		t.Run(string(holderMech)+" holds", func(t *testing.T) {
			dir := t.TempDir()
			holder := newDriverWith(t, file.Options{Dir: dir, Mechanism: holderMech})
			d := newDriverWith(t, file.Options{Dir: dir, Mechanism: other})
			ctx := ctxT(t)
			res := acquire(t, holder, "k", "a", time.Minute)
			if _, err := d.Acquire(ctx, drivers.AcquireRequest{Key: "k", Token: "b", TTL: time.Minute}); !errors.Is(err, file.ErrMechanism) {
				t.Fatalf("Acquire with %s: %v, want ErrMechanism", other, err)
			}
			if _, _, err := d.Inspect(ctx, "k"); !errors.Is(err, file.ErrMechanism) {
				t.Fatalf("Inspect with %s: %v, want ErrMechanism", other, err)
			}
			if ok, err := holder.Release(ctx, "k", "a"); !ok || err != nil {
				t.Fatalf("Release: %v, %v", ok, err)
			}
			got := acquire(t, d, "k", "b", time.Minute)
			if !got.Acquired || got.Fence != res.Fence+1 {
				t.Fatalf("Acquire of the released lock with %s: %+v, want fence %d", other, got, res.Fence+1)
			}
		})
	}
}
