//go:build unix

package main

import (
	"strings"
	"testing"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestNoCredentialInOutput: a password in the configuration appears in no
// output of any command, whether the store accepts it or fails.
func TestNoCredentialInOutput(t *testing.T) {
	const secret = "s3cret-Pa55"
	// PostgreSQL accepts the password (trust auth); Redis and MySQL refuse
	// every call, naming the store.
	configs, err := testutil.CredentialDrivers(secret)
	if err != nil {
		t.Fatal(err)
	}
	for name, driver := range configs {
		t.Run(name, func(t *testing.T) {
			cfg := writeConfig(t, driver)
			runs := [][]string{
				{"list", "--config", cfg},
				{"list", "--config", cfg, "--json"},
				{"inspect", "--config", cfg, "job"},
				{"inspect", "--config", cfg, "--json", "job"},
				{"release", "--config", cfg, "--force", "--yes", "job"},
				{"run", "job", "--config", cfg, "--timeout", "0", "--", "true"},
				{"inspect", "--config", cfg, "--store", "nope", "job"},
			}
			failures := 0
			for _, a := range runs {
				r := ctl(t, "", a...)
				if r.code != 0 {
					failures++
				}
				if strings.Contains(r.stdout+r.stderr, secret) {
					t.Errorf("mutexctl %s printed the password:\n%s%s", strings.Join(a, " "), r.stdout, r.stderr)
				}
			}
			if name != "postgres" && failures != len(runs) {
				t.Errorf("%d of %d runs failed on a store refusing the credentials", failures, len(runs))
			}
		})
	}
}
