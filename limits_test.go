package mutexfx_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/fx"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/drivers/etcd"
	"github.com/mutexfx/mutexfx/drivers/mysql"
	"github.com/mutexfx/mutexfx/drivers/postgres"
	"github.com/mutexfx/mutexfx/drivers/redis"
)

// TestModuleTTLFloor: a store's ttl under its driver's floor fails fx.New
// (and Open) at the ttl's key path, naming the floor; at the floor it
// passes. Nothing connects.
func TestModuleTTLFloor(t *testing.T) {
	drivers := mutexfx.WithDrivers(redis.Factory(), postgres.Factory(), mysql.Factory(), etcd.Factory())
	dir := t.TempDir()
	for _, tc := range []struct{ driver, ttl, want string }{
		{`{type: redis, url: "redis://127.0.0.1:1"}`, "100ms", `mutex.orders.ttl: must be at least 250ms for driver "redis": the shortest ttl it can serve`},
		{`{type: postgres, url: "postgres://127.0.0.1:1/db"}`, "400ms", `mutex.orders.ttl: must be at least 500ms for driver "postgres"`},
		{`{type: postgres, mode: table, url: "postgres://127.0.0.1:1/db"}`, "10ms", `mutex.orders.ttl: must be at least 500ms for driver "postgres"`},
		{`{type: mysql, dsn: "root@tcp(127.0.0.1:1)/db"}`, "499ms", `mutex.orders.ttl: must be at least 500ms for driver "mysql"`},
		{`{type: redis, url: "redis://127.0.0.1:1"}`, "250ms", ""},
		{`{type: mysql, mode: table, dsn: "root@tcp(127.0.0.1:1)/db"}`, "500ms", ""},
		{`{type: etcd, endpoints: ["127.0.0.1:1"]}`, "999ms", `mutex.orders.ttl: must be at least 1s for driver "etcd": the shortest ttl it can serve`},
		{`{type: etcd, endpoints: ["127.0.0.1:1"]}`, "1s", ""},
		{`{type: file, dir: "` + dir + `"}`, "10ms", ""},
		{`{type: memory}`, "10ms", ""},
	} {
		y := "mutex:\n  orders: {ttl: " + tc.ttl + ", driver: " + tc.driver + "}\n"
		app := fx.New(mutexfx.Module(yamlConfig(t, y), drivers), fx.NopLogger)
		err := app.Err()
		if err == nil { // built: its stores close on stop
			if err := app.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := app.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		reg, openErr := mutexfx.Open(yamlConfig(t, y), drivers)
		if openErr == nil {
			_ = reg.Close(context.Background())
		}
		for how, err := range map[string]error{"fx.New": err, "Open": openErr} {
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)) {
				t.Errorf("%s ttl %s: %s error %v; want %q", tc.driver, tc.ttl, how, err, tc.want)
			}
		}
	}
}

// TestModuleMaxNameLength: maxNameLength from the configuration bounds
// lock names; the default is 1 KiB.
func TestModuleMaxNameLength(t *testing.T) {
	reg, err := mutexfx.Open(yamlConfig(t, "mutex:\n  short: {maxNameLength: 8}\n  plain: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(context.Background())
	ctx := context.Background()
	short, _ := reg.Get("short")
	plain, _ := reg.Get("plain")
	for _, tc := range []struct {
		m    *mutexfx.Mutex
		name string
		ok   bool
	}{
		{short, "12345678", true},
		{short, "123456789", false},
		{plain, strings.Repeat("x", 1024), true},
		{plain, strings.Repeat("x", 1025), false},
	} {
		l, err := tc.m.TryAcquire(ctx, tc.name)
		if tc.ok != (err == nil && l != nil) || !tc.ok && !errors.Is(err, mutexfx.ErrNameTooLong) {
			t.Errorf("store %s, %d bytes: %v, %v", tc.m.Name(), len(tc.name), l, err)
		}
	}
}
