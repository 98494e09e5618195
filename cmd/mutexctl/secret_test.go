//go:build unix

package main

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestNoCredentialInOutput: a password in the configuration appears in no
// output of any command, whether the store accepts it or fails.
func TestNoCredentialInOutput(t *testing.T) {
	const secret = "s3cret-Pa55"
	u, err := url.Parse(testutil.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), secret) // trust auth: accepted, unused
	my, err := mysqldrv.ParseDSN(testutil.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(my.Addr)
	if err != nil {
		t.Fatal(err)
	}
	configs := map[string]string{
		"postgres": fmt.Sprintf("type: postgres\n      url: %q\n      mode: table", u.String()),
		// The server has no password: every call fails, naming the store.
		"redis": fmt.Sprintf("type: redis\n      addrs: [%q]\n      username: nobody\n      password: %q", testutil.RedisAddr(), secret),
		"mysql": fmt.Sprintf("type: mysql\n      host: %q\n      port: %s\n      database: %q\n      username: nobody\n      password: %q",
			host, port, my.DBName, secret),
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
