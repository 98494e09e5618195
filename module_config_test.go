package mutexfx_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/fx"
	fxt "go.uber.org/fx/fxtest"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/mysql"
	"github.com/mutexfx/mutexfx/drivers/postgres"
	"github.com/mutexfx/mutexfx/drivers/redis"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// TestModuleClientNotInGraph: a driver.client naming a client the fx graph
// does not have fails fx.New with a config error at the key path, naming
// the type and the name to provide; fx.ValidateApp fails too.
func TestModuleClientNotInGraph(t *testing.T) {
	all := mutexfx.WithDrivers(redis.Factory(), postgres.Factory(), mysql.Factory())
	rdb := goredis.NewClient(&goredis.Options{Addr: testutil.RedisAddr()}) // never used: nothing is built
	defer rdb.Close()
	named := func(name string) fx.Option {
		return fx.Supply(fx.Annotate(rdb, fx.As(new(goredis.UniversalClient)), fx.ResultTags(`name:"`+name+`"`)))
	}
	for _, tc := range []struct {
		typ, client string
		want        string
		other       fx.Option // a client of the right type under another name, or of another type under that name
	}{
		{"redis", "cache", `mutex.orders.driver.client: no redis.UniversalClient named "cache" in the fx graph`,
			named("other")},
		{"postgres", "primary", `mutex.orders.driver.client: no *pgxpool.Pool named "primary" in the fx graph`,
			fx.Supply(fx.Annotate(&pgxpool.Pool{}, fx.ResultTags(`name:"other"`)))},
		{"mysql", "appdb", `mutex.orders.driver.client: no *sql.DB named "appdb" in the fx graph`,
			fx.Supply(fx.Annotate(&sql.DB{}, fx.ResultTags(`name:"other"`)))},
		{"mysql", "cache", `mutex.orders.driver.client: no *sql.DB named "cache" in the fx graph`,
			named("cache")}, // a client of another type under that name
	} {
		t.Run(tc.typ+"/"+tc.client, func(t *testing.T) {
			k := yamlConfig(t, "mutex:\n  orders:\n    driver: {type: "+tc.typ+", client: "+tc.client+"}\n")
			hint := "fx.ResultTags(`name:\"" + tc.client + "\"`)"
			for _, extra := range []fx.Option{fx.Options(), tc.other} {
				opts := []fx.Option{mutexfx.Module(k, all), fx.Invoke(func(*mutexfx.Mutex) {}), fx.NopLogger, extra}
				err := fx.New(opts...).Err()
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), hint) {
					t.Errorf("fx.New: %v; want %q and %q", err, tc.want, hint)
				}
				if err := fx.ValidateApp(opts...); err == nil || !strings.Contains(err.Error(), tc.client) {
					t.Errorf("fx.ValidateApp: %v; want an error naming %q", err, tc.client)
				}
			}
		})
	}
}

// TestModuleClientInGraph: the same block with the client provided passes
// fx.ValidateApp and works on the real store.
func TestModuleClientInGraph(t *testing.T) {
	client := goredis.NewClient(&goredis.Options{Addr: testutil.RedisAddr()})
	defer client.Close()
	k := yamlConfig(t, "mutex:\n  orders:\n    driver: {type: redis, client: cache}\n")
	opts := []fx.Option{
		fx.Supply(fx.Annotate(client, fx.As(new(goredis.UniversalClient)), fx.ResultTags(`name:"cache"`))),
		mutexfx.Module(k, mutexfx.WithDrivers(redis.Factory())),
	}
	if err := fx.ValidateApp(append(opts, fx.Invoke(func(*mutexfx.Mutex) {}), fx.NopLogger)...); err != nil {
		t.Fatalf("ValidateApp: %v", err)
	}
	var m *mutexfx.Mutex
	app := fxt.New(t, append(opts, fx.Populate(&m))...)
	app.RequireStart()
	defer app.RequireStop()
	if err := m.Do(context.Background(), "module-client:"+t.Name(), func(context.Context, *mutexfx.Lock) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestModuleDriverTypeHints: a type in another case or a well-known alias
// is not accepted, but its error says which type is meant and the package
// providing it.
func TestModuleDriverTypeHints(t *testing.T) {
	const pkg = "github.com/mutexfx/mutexfx/drivers/"
	for _, tc := range []struct {
		typ  string
		want []string
	}{
		{"mariadb", []string{`unknown driver type "mariadb": did you mean "mysql"`, `"` + pkg + `mysql"`}},
		{"MariaDB", []string{`unknown driver type "MariaDB": did you mean "mysql"`, `"` + pkg + `mysql"`}},
		{"Redis", []string{`unknown driver type "Redis": did you mean "redis"`, `"` + pkg + `redis"`}},
		{"postgresql", []string{`unknown driver type "postgresql": did you mean "postgres"`, `"` + pkg + `postgres"`}},
		{"PostgreSQL", []string{`did you mean "postgres"`, `"` + pkg + `postgres"`}},
		{"pg", []string{`did you mean "postgres"`, `"` + pkg + `postgres"`}},
		{"pgsql", []string{`did you mean "postgres"`}},
		{"MySQL", []string{`did you mean "mysql"`}},
		{"Memory", []string{`did you mean "memory"`, "built in"}},
		{"FILE", []string{`did you mean "file"`, "built in"}},
		{"etcd", []string{`driver "etcd" is not linked into this binary: import "` + pkg + `etcd"`}},
		{"consul", []string{`unknown driver type "consul" (mutexfx ships memory, file, redis, postgres, mysql, etcd)`}},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			k := yamlConfig(t, "mutex:\n  orders: {driver: {type: "+tc.typ+"}}\n")
			// linked or not, the hint is the same
			for _, opts := range [][]mutexfx.Option{nil, {mutexfx.WithDrivers(redis.Factory(), postgres.Factory(), mysql.Factory())}} {
				err := fx.New(mutexfx.Module(k, opts...), fx.NopLogger).Err()
				if !errors.Is(err, drivers.ErrDriverNotFound) || !strings.Contains(err.Error(), "mutex.orders.driver.type: ") {
					t.Fatalf("fx.New: %v; want ErrDriverNotFound at mutex.orders.driver.type", err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("fx.New: %v; want %q", err, w)
					}
				}
				_, err = mutexfx.Open(k, opts...)
				if !errors.Is(err, drivers.ErrDriverNotFound) || !strings.Contains(err.Error(), tc.want[0]) {
					t.Errorf("Open: %v; want %q", err, tc.want[0])
				}
			}
		})
	}
}
