//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/cobra"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers/mysql"
	"github.com/mutexfx/mutexfx/drivers/postgres"
	"github.com/mutexfx/mutexfx/drivers/redis"
)

// usageError is a bad flag or argument (exit code ExitUsage).
type usageError struct{ error }

// globals are the flags shared by every command.
type globals struct {
	config string
	path   string
	store  string
	stdin  io.Reader
}

func newRoot(stdin io.Reader) *cobra.Command {
	g := &globals{stdin: stdin}
	root := &cobra.Command{
		Use:           "mutexctl",
		Short:         "Look at and act on the locks of a mutexfx store",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	f := root.PersistentFlags()
	f.StringVarP(&g.config, "config", "c", "", "the application's configuration file (.yaml, .yml or .toml); MUTEXFX_* variables override it")
	f.StringVar(&g.path, "path", config.DefaultPath, "key path of the stores in the configuration")
	f.StringVarP(&g.store, "store", "s", "", "store name (default: the configuration's default store)")
	root.AddCommand(newList(g), newInspect(g), newRelease(g), newRun(g))
	return root
}

// args wraps a cobra positional-argument check into a usage error.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// load reads the configuration file, then MUTEXFX_* environment variables
// (a double underscore separates keys, as in examples/config).
func load(path string) (*koanf.Koanf, error) {
	if path == "" {
		return nil, usageError{fmt.Errorf("--config FILE is required")}
	}
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

// open builds the registry of the configured stores (connecting nothing)
// and returns the chosen store. The caller closes the registry.
func (g *globals) open(ctx context.Context) (*mutexfx.Registry, *mutexfx.Mutex, error) {
	k, err := load(g.config)
	if err != nil {
		return nil, nil, err
	}
	reg, err := mutexfx.Open(k, mutexfx.WithPath(g.path),
		mutexfx.WithDrivers(redis.Factory(), postgres.Factory(), mysql.Factory()))
	if err != nil {
		return nil, nil, err
	}
	m, err := reg.Default()
	if g.store != "" {
		m, err = reg.Get(g.store)
	}
	if err != nil {
		_ = reg.Close(ctx)
		return nil, nil, err
	}
	return reg, m, nil
}

// withStore runs fn on the chosen store and closes the registry after.
func (g *globals) withStore(ctx context.Context, fn func(*mutexfx.Mutex) error) (err error) {
	reg, m, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := reg.Close(context.WithoutCancel(ctx)); err == nil && cerr != nil {
			err = cerr
		}
	}()
	return fn(m)
}
