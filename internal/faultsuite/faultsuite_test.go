//go:build linux

package faultsuite

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// runTestChild plays a child of a run started by the tests.
func runTestChild(role string) int {
	if role != "faults" {
		return 2
	}
	return RunChild()
}

// shortRun is a mode's duration in the suite: MUTEXFX_FAULTS_DURATION, or
// 10 s and 3 s per fault of the mode, so that each fault happens at least
// once (25 s for Sentinel and Cluster: Sentinel's fail-overs come at least
// FailoverGap apart).
func shortRun(t *testing.T, m Mode) time.Duration {
	if s := os.Getenv("MUTEXFX_FAULTS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("MUTEXFX_FAULTS_DURATION: %v", err)
		}
		return d
	}
	d := max(10*time.Second, time.Duration(len(m.Faults))*3*time.Second)
	if slices.Contains(m.Faults, FaultFailover) {
		d = max(d, 2*FailoverGap+time.Second) // both fail-overs
	}
	return d
}

// seed is MUTEXFX_FAULTS_SEED, the seed a failed run printed, to run its
// faults again; 0 (random) when unset.
func seed(t *testing.T) uint64 {
	s := os.Getenv("MUTEXFX_FAULTS_SEED")
	if s == "" {
		return 0
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("MUTEXFX_FAULTS_SEED: %v", err)
	}
	return n
}

// TestModes runs every store mode for a short while under every fault of
// the mode, and fails when the history misses a goal of issue 18.
func TestModes(t *testing.T) {
	for _, m := range Modes {
		t.Run(m.Name, func(t *testing.T) {
			cfg := Config{Store: m.Name, Duration: shortRun(t, m), Procs: 3, Workers: 3, Locks: 2, TTL: time.Second, Seed: seed(t)}
			res, err := Run(t, cfg, func(env []string) *exec.Cmd { return testutil.Child(t, "faults", env...) }, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s\n%s", m.Name, res.Report.Summary())
			if len(res.ChildErrors) > 0 {
				t.Errorf("children failed: %s", strings.Join(res.ChildErrors, "; "))
			}
			if res.Report.Grants == 0 || res.Report.WritesOK == 0 {
				t.Errorf("no holder got a lock and wrote: %d grants, %d writes", res.Report.Grants, res.Report.WritesOK)
			}
			for i, o := range res.Report.Overlaps {
				if i < 3 {
					t.Logf("overlap of %v:\n%s", o.Duration, Explain(res.History, o))
				}
			}
			if dir := os.Getenv("MUTEXFX_FAULTS_HISTORY"); dir != "" {
				if err := WriteHistory(filepath.Join(dir, m.Name+".jsonl"), res.History); err != nil {
					t.Error(err)
				}
			}
			if missed := m.Missed(res.Report); len(missed) > 0 {
				t.Errorf("goals missed:\n%s", strings.Join(missed, "\n"))
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	good := Config{Store: "redis", Duration: time.Second, Procs: 1, Workers: 1, Locks: 1, TTL: time.Second}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"unknown store", func(c *Config) { c.Store = "zookeeper" }, `-store "zookeeper" is unknown (one of file, memory, redis`},
		{"no duration", func(c *Config) { c.Duration = 0 }, "-duration must be positive"},
		{"no procs", func(c *Config) { c.Procs = 0 }, "-procs must be 1 to 64"},
		{"no workers", func(c *Config) { c.Workers = 0 }, "-workers must be 1 to 64"},
		{"no locks", func(c *Config) { c.Locks = 0 }, "-locks must be 1 to 1000"},
		{"short ttl", func(c *Config) { c.TTL = time.Millisecond }, "-ttl must be at least 100ms"},
		{"fault of another store", func(c *Config) { c.Faults = []string{FaultFailover} }, `-faults: "failover" does not apply to store redis`},
		{"etcd fault on redis", func(c *Config) { c.Faults = []string{FaultLeaderKill} }, `-faults: "leaderkill" does not apply to store redis`},
		{"unknown fault", func(c *Config) { c.Faults = []string{"flood"} }, `-faults: "flood" does not apply`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
	c := good
	if err := c.Validate(); err != nil || len(c.Faults) != 5 {
		t.Fatalf("Validate(good) = %v, faults %v", err, c.Faults)
	}
}
