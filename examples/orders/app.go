package main

import (
	"time"

	"github.com/knadh/koanf/v2"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/config"
	"github.com/mutexfx/mutexfx/drivers/redis"
	"github.com/mutexfx/mutexfx/schedule"
)

// Settings are the app's own configuration keys, under "orders".
type Settings struct {
	// Addr is where the HTTP server listens. Default 127.0.0.1:8080.
	Addr string `koanf:"addr"`
	// ExpireEvery is the period of the exclusive schedule. Default 1m.
	ExpireEvery time.Duration `koanf:"expireEvery"`
	// PayTime is how long the stand-in payment provider takes. Default 150ms.
	PayTime time.Duration `koanf:"payTime"`
}

func loadSettings(k *koanf.Koanf) (Settings, error) {
	s := Settings{Addr: "127.0.0.1:8080", ExpireEvery: time.Minute, PayTime: 150 * time.Millisecond}
	if err := config.Decode("orders", k.Cut("orders").Raw(), &s); err != nil {
		return s, err
	}
	return s, nil
}

// appOptions is the whole application: the lock stores configured under
// "mutex" (memory, file or Redis), the orders, the HTTP server and the
// exclusive schedule.
func appOptions(k *koanf.Koanf, level zapcore.Level) fx.Option {
	settings, err := loadSettings(k)
	if err != nil {
		return fx.Error(err)
	}
	return fx.Options(
		fx.Supply(settings),
		fx.Provide(func() (*zap.Logger, error) {
			cfg := zap.NewDevelopmentConfig()
			cfg.Level = zap.NewAtomicLevelAt(level)
			return cfg.Build()
		}),
		fx.WithLogger(func(log *zap.Logger) fxevent.Logger {
			l := &fxevent.ZapLogger{Logger: log}
			l.UseLogLevel(zap.DebugLevel)
			return l
		}),
		mutexfx.Module(k, mutexfx.WithDrivers(redis.Factory())),
		schedule.Module,
		fx.Provide(NewOrders, NewServer, NewMetrics),
		schedule.ProvideJob(expireJob),
		fx.Invoke(func(*Server) {}),
	)
}

// expireJob is the exclusive schedule: each instant, in one instance only.
func expireJob(s Settings, o *Orders) schedule.Job {
	return schedule.Job{Name: "orders.expire", Every: s.ExpireEvery, Exclusive: true, Run: o.ExpireUnpaid}
}
