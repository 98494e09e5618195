// Command orders is an fx HTTP application using mutexfx: a synchronized
// endpoint (one payment per order at a time, in every instance) behind a
// stand-in authentication middleware, and an exclusive schedule (one
// instance expires the unpaid orders each minute).
//
//	go run ./examples/orders                 # serve on 127.0.0.1:8080
//	go run ./examples/orders -demo           # fire requests at itself, print, exit
//	go run ./examples/orders -config my.yaml # e.g. the file or Redis store
//
// The store is memory by default; config.yaml shows the file and Redis
// alternatives.
package main

import (
	_ "embed"
	"flag"
	"fmt"
	"os"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
	"go.uber.org/fx"
	"go.uber.org/zap/zapcore"
)

//go:embed config.yaml
var defaultConfig []byte

func main() {
	configPath := flag.String("config", "", "YAML configuration file (default: the embedded config.yaml)")
	demo := flag.Bool("demo", false, "serve on a free port, send a few concurrent requests, print what happened and exit")
	flag.Parse()

	k, err := loadConfig(*configPath, *demo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(2)
	}
	level := zapcore.InfoLevel
	if *demo {
		level = zapcore.WarnLevel
	}
	opts := []fx.Option{appOptions(k, level)}
	if *demo {
		opts = append(opts, fx.Invoke(runDemo))
	}
	app := fx.New(opts...)
	if err := app.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
	app.Run()
	if *demo && demoFailed.Load() {
		os.Exit(1)
	}
}

// loadConfig reads the YAML configuration; the demo listens on a free port
// and expires orders every 500 ms so that a run shows.
func loadConfig(path string, demo bool) (*koanf.Koanf, error) {
	k := koanf.New(".")
	var err error
	if path == "" {
		err = k.Load(rawbytes.Provider(defaultConfig), yaml.Parser())
	} else {
		err = k.Load(file.Provider(path), yaml.Parser())
	}
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if demo {
		_ = k.Set("orders.addr", "127.0.0.1:0")
		_ = k.Set("orders.expireEvery", "500ms")
	}
	return k, nil
}
