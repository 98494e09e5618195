package main

import (
	"context"
	"testing"

	"go.uber.org/fx"
	fxt "go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	"github.com/mutexfx/mutexfx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConfigFiles(t *testing.T) {
	for _, f := range []string{"config.yaml", "config.toml"} {
		k, err := load(f)
		if err != nil {
			t.Fatal(err)
		}
		k.Set("mutex.jobs.driver.dir", t.TempDir())
		var s stores
		app := fxt.New(t, mutexfx.Module(k), fx.Populate(&s))
		app.RequireStart()
		if s.Jobs.Prefix() != "jobs:" || s.Jobs.Features().Scope != "host" || s.Default.Name() != "mutex" {
			t.Fatalf("%s: jobs %q %q, default %q", f, s.Jobs.Prefix(), s.Jobs.Features().Scope, s.Default.Name())
		}
		if err := work(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		app.RequireStop()
	}
}

func TestEnvOverride(t *testing.T) {
	t.Setenv("MUTEXFX_MUTEX__JOBS__TTL", "5")
	k, err := load("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	err = fx.New(fx.NopLogger, mutexfx.Module(k)).Err()
	if err == nil || err.Error() != "mutex.jobs.ttl: must be at least 10ms" {
		t.Fatalf("5 ms ttl from the environment: %v", err)
	}
}
