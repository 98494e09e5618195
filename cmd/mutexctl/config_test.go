//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigFiles: TOML is read like YAML, --store picks a store other
// than the default, and bad input exits with a message naming the problem.
func TestConfigFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.toml")
	cfg := "[mutex.main]\ndefault = true\n[mutex.main.driver]\ntype = \"file\"\ndir = \"" + dir + "/main\"\n\n[mutex.jobs]\nprefix = \"jobs:\"\n[mutex.jobs.driver]\ntype = \"file\"\ndir = \"" + dir + "/locks\"\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		out  string // in stdout, or in stderr for a failure
	}{
		{[]string{"inspect", "--config", path, "--store", "jobs", "x"}, 0, "free"},
		{[]string{"list", "--config", path, "--store", "jobs"}, 0, "NAME"},
		{[]string{"inspect", "--config", path, "x"}, 0, "free"},
		{[]string{"inspect", "--config", path, "--store", "nope", "x"}, ExitError, `"nope" (configured: jobs, main)`},
		{[]string{"inspect", "x"}, ExitUsage, "--config FILE is required"},
		{[]string{"inspect", "--config", filepath.Join(dir, "missing.yaml"), "x"}, ExitError, "missing.yaml"},
		{[]string{"inspect", "--config", path}, ExitUsage, "accepts 1 arg"},
		{[]string{"run", "x", "--config", path, "true"}, ExitUsage, "NAME -- CMD"},
		{[]string{"list", "--config", path, "--bogus"}, ExitUsage, "bogus"},
	}
	for _, c := range cases {
		r := ctl(t, "", c.args...)
		text := r.stdout
		if c.code != 0 {
			text = r.stderr
		}
		if r.code != c.code || !strings.Contains(text, c.out) {
			t.Errorf("mutexctl %s: %+v; want exit %d and %q", strings.Join(c.args, " "), r, c.code, c.out)
		}
	}
}
