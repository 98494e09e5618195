package redis

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// LogTo sends the go-redis client's own log lines (failed dials, pool
// errors), which it writes to stderr by default, to log at Warn level,
// with logger "redis". go-redis has one logger per process: the last call
// wins. Stores built from configuration call it with the application's
// logger; a logger that drops Warn is ignored.
func LogTo(log *zap.Logger) {
	if log == nil || !log.Core().Enabled(zap.WarnLevel) {
		return
	}
	goredis.SetLogger(zapLogging{log.Named("redis")})
}

// zapLogging is go-redis's Logging on zap.
type zapLogging struct{ log *zap.Logger }

func (z zapLogging) Printf(_ context.Context, format string, v ...any) {
	z.log.Warn(fmt.Sprintf(format, v...))
}
