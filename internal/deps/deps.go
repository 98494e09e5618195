//go:build mutexfxdeps

// Package deps pins module versions while the packages that use them are written.
package deps

import (
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/go-viper/mapstructure/v2"
	_ "github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/knadh/koanf/parsers/toml/v2"
	_ "github.com/knadh/koanf/parsers/yaml"
	_ "github.com/knadh/koanf/providers/confmap"
	_ "github.com/knadh/koanf/providers/env/v2"
	_ "github.com/knadh/koanf/providers/file"
	_ "github.com/knadh/koanf/providers/rawbytes"
	_ "github.com/knadh/koanf/v2"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/robfig/cron/v3"
	_ "go.uber.org/fx"
	_ "go.uber.org/goleak"
	_ "go.uber.org/zap"
	_ "golang.org/x/sys/unix"
)
