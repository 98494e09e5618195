package redis_test

import (
	"context"
	"net"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mutexfx/mutexfx/drivers/redis"
)

// TestLogTo: the client's failed dial is logged through zap, not stderr.
func TestLogTo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	core, logs := observer.New(zapcore.WarnLevel)
	redis.LogTo(zap.New(core))
	drv, err := redis.New(redis.Options{Addrs: []string{dead}})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close(context.Background())
	if err := drv.Ping(context.Background()); err == nil {
		t.Fatal("ping of a closed port answered")
	}
	if logs.FilterLoggerName("redis").FilterMessageSnippet(dead).Len() == 0 {
		t.Errorf("no zap line from go-redis about %s; got %v", dead, logs.All())
	}
}
