package main

import (
	"context"
	"fmt"
	"time"

	goredislib "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/drivers/redis"
	"github.com/mutexfx/mutexfx/schedule"
)

// runMutexfx runs three mutexfx schedulers (memory store, or Redis when
// rdb is set) until ctx ends.
func runMutexfx(rdb *goredislib.Client) func(context.Context, *scenario, *recorder) error {
	return func(ctx context.Context, sc *scenario, rec *recorder) error {
		var drv drivers.Driver = memory.New()
		prefix := fmt.Sprintf("mutexfx-bench:%d:", time.Now().UnixNano())
		offsets := []time.Duration{-sc.skew, 0, sc.skew}
		var stops []func()
		defer func() {
			for _, stop := range stops {
				stop()
			}
		}()
		for _, off := range offsets {
			if rdb != nil {
				var err error
				if drv, err = redis.NewWithClient(rdb, redis.Options{}); err != nil {
					return err
				}
			}
			m, err := component.New(component.Options{Driver: drv, Prefix: prefix})
			if err != nil {
				return err
			}
			s, err := schedule.New(schedule.Options{Mutex: m, Clock: schedule.OffsetClock(off)},
				schedule.Job{Name: "report", Every: period, Exclusive: true, Run: func(ctx context.Context) error {
					p, _ := schedule.Planned(ctx)
					rec.record(p)
					time.Sleep(jobTime) // the job's work
					return nil
				}})
			if err != nil {
				return err
			}
			if err := s.Start(ctx); err != nil {
				return err
			}
			stops = append(stops, func() {
				_ = s.Stop(context.Background())
				_ = m.Close(context.Background())
			})
		}
		<-ctx.Done()
		return nil
	}
}
