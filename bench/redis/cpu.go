package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// serverCPU is the CPU time the Redis server at addr has used since it
// started (INFO cpu: system plus user, all its threads).
func serverCPU(ctx context.Context, addr string) (time.Duration, error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var total float64
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		s, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, err
		}
		total += s
	}
	return time.Duration(total * float64(time.Second)), nil
}
