package drivers_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEventKindString(t *testing.T) {
	for k, want := range map[drivers.EventKind]string{drivers.Released: "released", drivers.Lost: "lost", 0: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q; want %q", k, got, want)
		}
	}
}

// bare implements only the Driver interface.
type bare struct{}

func (bare) Acquire(context.Context, drivers.AcquireRequest) (drivers.AcquireResult, error) {
	return drivers.AcquireResult{}, nil
}
func (bare) Release(context.Context, string, string) (bool, error)               { return false, nil }
func (bare) Extend(context.Context, string, string, time.Duration) (bool, error) { return false, nil }
func (bare) Close(context.Context) error                                         { return nil }

func TestFeaturesOf(t *testing.T) {
	if f := drivers.FeaturesOf(bare{}); !f.Expiring || !f.Fencing || f.ServerTime || f.InProcess {
		t.Errorf("default features %+v: want expiring with fencing, client time, not in process", f)
	}
	if f := drivers.FeaturesOf(memory.New()); !f.InProcess || f.Scope != "process" {
		t.Errorf("memory features %+v", f)
	}
}

func TestPackageOf(t *testing.T) {
	if got := drivers.PackageOf("redis"); got != "github.com/mutexfx/mutexfx/drivers/redis" {
		t.Errorf("PackageOf(redis) = %q", got)
	}
	if got := drivers.PackageOf("etcd"); got != "github.com/mutexfx/mutexfx/drivers/etcd" {
		t.Errorf("PackageOf(etcd) = %q", got)
	}
	if got := drivers.PackageOf("consul"); got != "" {
		t.Errorf("PackageOf(consul) = %q", got)
	}
}

func TestSuggest(t *testing.T) {
	for in, want := range map[string]string{
		"Redis": "redis", "REDIS": "redis", " redis ": "redis", "MySQL": "mysql", "Memory": "memory", "File": "file",
		"mariadb": "mysql", "MariaDB": "mysql", "postgresql": "postgres", "PostgreSQL": "postgres", "pg": "postgres",
		"pgsql": "postgres", "pgx": "postgres",
		"redis": "", "postgres": "", "etcd": "", "": "", // exact types and unknown ones: no hint
	} {
		if got := drivers.Suggest(in); got != want {
			t.Errorf("Suggest(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestRenewFailed: one result per lease, each failed with the error.
func TestRenewFailed(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		got := drivers.RenewFailed(n, drivers.ErrClosed)
		if len(got) != n {
			t.Fatalf("RenewFailed(%d): %d results", n, len(got))
		}
		for i, r := range got {
			if r.Held || r.Err != drivers.ErrClosed {
				t.Fatalf("RenewFailed(%d)[%d] = %+v; want Err ErrClosed", n, i, r)
			}
		}
	}
}
