// Command config runs an fx application whose two lock stores come from a
// configuration file (YAML, or TOML with -config x.toml) with environment
// overrides (MUTEXFX_MUTEX__JOBS__TTL=90s), injected by name. It exits 0.
//
//	go run ./examples/config
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/mutexfx/mutexfx"
)

func main() {
	_, here, _, _ := runtime.Caller(0)
	path := flag.String("config", filepath.Join(filepath.Dir(here), "config.yaml"), "configuration file (.yaml or .toml)")
	flag.Parse()
	k, err := load(*path)
	if err != nil {
		log.Fatal(err)
	}
	app := fx.New(
		fx.NopLogger,
		fx.Provide(zap.NewDevelopment),
		mutexfx.Module(k),
		fx.Invoke(run),
	)
	if err := app.Err(); err != nil {
		log.Fatal(err) // invalid configuration fails here, naming the key path
	}
	app.Run()
}

// load reads the file, then MUTEXFX_* environment variables: a double
// underscore separates keys (MUTEXFX_MUTEX__JOBS__TTL → mutex.jobs.ttl).
func load(path string) (*koanf.Koanf, error) {
	k := koanf.New(".")
	var parser koanf.Parser = yaml.Parser()
	if strings.HasSuffix(path, ".toml") {
		parser = toml.Parser()
	}
	if err := k.Load(file.Provider(path), parser); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	err := k.Load(env.Provider(".", env.Opt{
		Prefix: "MUTEXFX_",
		TransformFunc: func(k, v string) (string, any) {
			return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(k, "MUTEXFX_")), "__", "."), v
		},
	}), nil)
	return k, err
}

type stores struct {
	fx.In
	Default *mutexfx.Mutex // the "mutex" store
	Jobs    *mutexfx.Mutex `name:"jobs"` // the file store
}

func run(lc fx.Lifecycle, s stores, sd fx.Shutdowner) {
	lc.Append(fx.StartHook(func() {
		// Hooks only schedule work.
		go func() {
			if err := work(context.Background(), s); err != nil {
				fmt.Fprintln(os.Stderr, err)
				_ = sd.Shutdown(fx.ExitCode(1))
				return
			}
			_ = sd.Shutdown()
		}()
	}))
}

func work(ctx context.Context, s stores) error {
	err := s.Jobs.Do(ctx, "nightly-export", func(ctx context.Context, l *mutexfx.Lock) error {
		fmt.Printf("store %q (%s scope): holding %q, fence %d\n", s.Jobs.Name(), s.Jobs.Features().Scope, l.Name(), l.Fence())
		return nil
	})
	if err != nil {
		return err
	}
	return s.Default.Do(ctx, "order:42", func(ctx context.Context, l *mutexfx.Lock) error {
		fmt.Printf("store %q (%s scope): holding %q, fence %d\n", s.Default.Name(), s.Default.Features().Scope, l.Name(), l.Fence())
		return nil
	})
}
