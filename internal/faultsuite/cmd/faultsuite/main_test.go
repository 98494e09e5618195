//go:build linux

package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBadInput checks that bad flags end with exit code 2 and an error
// naming the flag, before any store is started.
func TestBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no store", nil, `-store "" is unknown`},
		{"unknown store", []string{"-store", "zookeeper"}, `-store "zookeeper" is unknown (one of file, memory`},
		{"fault of another store", []string{"-store", "file", "-faults", "restart"}, `-faults: "restart" does not apply to store file`},
		{"bad ttl", []string{"-store", "memory", "-ttl", "1ms"}, "-ttl must be at least 100ms"},
		{"bad procs", []string{"-store", "memory", "-procs", "0"}, "-procs must be 1 to 64"},
		{"stray argument", []string{"-store", "memory", "extra"}, `unexpected arguments ["extra"]`},
		{"unknown flag", []string{"-stores", "memory"}, "flag provided but not defined: -stores"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(tt.args, &out, &errOut); code != 2 {
				t.Fatalf("exit code %d, want 2; stderr:\n%s", code, errOut.String())
			}
			if !strings.Contains(errOut.String(), tt.want) {
				t.Fatalf("stderr %q, want it to contain %q", errOut.String(), tt.want)
			}
		})
	}
}

// TestMemoryRun runs the memory mode (goroutines, no child, no fault) for
// a second: the goals are met and the summary is printed.
func TestMemoryRun(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"-store", "memory", "-duration", "1s", "-ttl", "200ms", "-procs", "2", "-workers", "2", "-locks", "1"}, &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), "goals met") || !strings.Contains(out.String(), "grants ") {
		t.Fatalf("exit code %d; stdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
}
