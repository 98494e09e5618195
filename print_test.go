package mutexfx_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestNoSecretPrinted: no fmt verb, JSON or zap encoding of any driver
// (m.Driver()), Mutex or Registry prints a password, for every driver and
// every way a password may be configured.
func TestNoSecretPrinted(t *testing.T) {
	const secret = "S3cr3tPW"
	for _, tc := range []struct{ name, driver string }{
		{"memory", `{type: memory}`},
		{"file", `{type: file, dir: "` + t.TempDir() + `"}`},
		{"redis url", `{type: redis, url: "redis://app:` + secret + `@127.0.0.1:1/0"}`},
		{"redis password", `{type: redis, addrs: ["127.0.0.1:1"], password: ` + secret + `}`},
		{"redis sentinel", `{type: redis, addrs: ["127.0.0.1:1"], masterName: m, password: ` + secret + `, sentinelPassword: ` + secret + `}`},
		{"postgres url", `{type: postgres, url: "postgres://app:` + secret + `@127.0.0.1:1/db"}`},
		{"postgres key=value", `{type: postgres, url: "host=127.0.0.1 port=1 user=app password=` + secret + ` dbname=db"}`},
		{"postgres password", `{type: postgres, host: 127.0.0.1, port: 1, username: app, password: ` + secret + `}`},
		{"postgres table", `{type: postgres, mode: table, url: "postgres://app:` + secret + `@127.0.0.1:1/db"}`},
		{"mysql dsn", `{type: mysql, dsn: "app:` + secret + `@tcp(127.0.0.1:1)/db"}`},
		{"mysql password", `{type: mysql, host: 127.0.0.1, port: 1, username: app, password: ` + secret + `}`},
		{"mysql table", `{type: mysql, mode: table, dsn: "app:` + secret + `@tcp(127.0.0.1:1)/db"}`},
		{"etcd password", `{type: etcd, endpoints: ["127.0.0.1:1"], username: app, password: ` + secret + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg, err := mutexfx.Open(yamlConfig(t, "mutex:\n  s: {driver: "+tc.driver+"}\n"), allDrivers)
			if err != nil {
				t.Fatal(err)
			}
			defer reg.Close(context.Background())
			m, _ := reg.Get("s")
			printed := testutil.Printed(map[string]any{"driver": m.Driver(), "mutex": m, "registry": reg})
			for how, out := range printed {
				if strings.Contains(out, secret) {
					t.Errorf("%s prints the password: %s", how, out)
				}
			}
		})
	}
}
