//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/toml/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/cobra"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers/etcd"
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
	// storeTimeout bounds list, inspect and release, and closing the
	// store.
	storeTimeout time.Duration
	stdin        io.Reader
}

func newRoot(stdin io.Reader) *cobra.Command {
	g := &globals{stdin: stdin}
	root := &cobra.Command{
		Use:           "mutexctl",
		Short:         "Look at and act on the locks of a mutexfx store",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if g.storeTimeout <= 0 {
			return usageError{fmt.Errorf("--store-timeout must be positive, got %v", g.storeTimeout)}
		}
		return nil
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	f := root.PersistentFlags()
	f.StringVarP(&g.config, "config", "c", "", "the application's configuration file (.yaml, .yml or .toml); MUTEXFX_* variables override it")
	f.StringVar(&g.path, "path", config.DefaultPath, "key path of the stores in the configuration")
	f.StringVarP(&g.store, "store", "s", "", "store name (default: the configuration's default store)")
	f.DurationVar(&g.storeTimeout, "store-timeout", 30*time.Second, "how long list, inspect and release wait for the store")
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
		mutexfx.WithDrivers(redis.Factory(), postgres.Factory(), mysql.Factory(), etcd.Factory()))
	if err != nil {
		return nil, nil, err
	}
	m, err := reg.Default()
	if g.store != "" {
		m, err = reg.Get(g.store)
	}
	if err == nil && m.Features().Scope == "process" {
		// Nothing else sees its locks: every lock would show free, and run
		// would exclude nobody (a wrong --path, another application's file).
		err = fmt.Errorf("store %q is a memory store, private to mutexctl: nothing to inspect or lock across processes", m.Name())
		if !k.Exists(g.path) {
			err = fmt.Errorf("%s: no store configured under %q (a memory store, private to mutexctl): check --config and --path", g.config, g.path)
		}
	}
	if err != nil {
		_ = reg.Close(ctx)
		return nil, nil, err
	}
	return reg, m, nil
}

// withStore runs fn on the chosen store and closes the registry after,
// within --store-timeout.
func (g *globals) withStore(ctx context.Context, fn func(*mutexfx.Mutex) error) (err error) {
	reg, m, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.storeTimeout)
		defer cancel()
		if cerr := reg.Close(cctx); err == nil && cerr != nil {
			err = cerr
		}
	}()
	return fn(m)
}

// errNoAnswer is the cause of a store call's context at --store-timeout.
var errNoAnswer = errors.New("no answer from the store within --store-timeout")

// call returns the context of a store call of list, inspect or release: it
// ends after --store-timeout, so that a hung store fails the command
// instead of blocking it.
func (g *globals) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, g.storeTimeout, errNoAnswer)
}

// callError is err, the error of a store call made with ctx, saying so when
// the call ran out of time.
func callError(ctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(ctx), errNoAnswer) {
		return fmt.Errorf("%w (%w)", err, errNoAnswer)
	}
	return err
}
