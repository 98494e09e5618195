package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/jonboulle/clockwork"
	goredislib "github.com/redis/go-redis/v9"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

// offsetClock is the real clock read with an offset: an instance whose
// clock is early or late. gocron plans with Now and waits with AfterFunc.
type offsetClock struct {
	clockwork.Clock
	offset time.Duration
}

func (c offsetClock) Now() time.Time                  { return time.Now().Add(c.offset) }
func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c offsetClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

var errHeld = errors.New("lock held")

// mutexLocker is a gocron.Locker over a mutexfx Mutex: one attempt, as
// gocron lockers do; gocron unlocks right after the job returns.
type mutexLocker struct{ m *component.Mutex }

type mutexLock struct{ l *component.Lock }

func (ml mutexLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	l, err := ml.m.TryAcquire(ctx, key)
	if errors.Is(err, component.ErrLocked) {
		return nil, errHeld
	}
	if err != nil {
		return nil, err
	}
	return mutexLock{l}, nil
}

func (l mutexLock) Unlock(ctx context.Context) error { _, err := l.l.Release(ctx); return err }

var lockerSeq atomic.Int64

// memoryLocker returns, per instance, a locker on one in-memory store
// shared by the three instances.
func memoryLocker() func() (gocron.Locker, func()) {
	drv := memory.New()
	prefix := fmt.Sprintf("gocron%d:", lockerSeq.Add(1))
	return func() (gocron.Locker, func()) {
		m, _ := component.New(component.Options{Driver: drv, Prefix: prefix})
		return mutexLocker{m}, func() { _ = m.Close(context.Background()) }
	}
}

// redisLocker returns, per instance, a redsync locker on Redis, as the
// gocron-redis-lock package does (redsync, 8 s expiry, one try).
func redisLocker(rdb *goredislib.Client) func() (gocron.Locker, func()) {
	prefix := fmt.Sprintf("mutexfx-bench:gocron:%d:%d:", time.Now().UnixNano(), lockerSeq.Add(1))
	return func() (gocron.Locker, func()) {
		return redsyncLocker{rs: redsync.New(goredis.NewPool(rdb)), prefix: prefix}, func() {}
	}
}

type redsyncLocker struct {
	rs     *redsync.Redsync
	prefix string
}

type redsyncLock struct{ mu *redsync.Mutex }

func (r redsyncLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	mu := r.rs.NewMutex(r.prefix+key, redsync.WithExpiry(8*time.Second), redsync.WithTries(1))
	if err := mu.LockContext(ctx); err != nil {
		return nil, err
	}
	return redsyncLock{mu}, nil
}

func (l redsyncLock) Unlock(ctx context.Context) error { _, err := l.mu.UnlockContext(ctx); return err }

// runGocron runs three gocron schedulers with the job def until ctx ends.
func runGocron(newLocker func() (gocron.Locker, func()), def func() gocron.JobDefinition) func(context.Context, *scenario, *recorder) error {
	return func(ctx context.Context, sc *scenario, rec *recorder) error {
		offsets := []time.Duration{-sc.skew, 0, sc.skew}
		var scheds []gocron.Scheduler
		defer func() {
			for _, s := range scheds {
				_ = s.Shutdown()
			}
		}()
		for i, off := range offsets {
			if i > 0 && sc.stagger > 0 {
				time.Sleep(sc.stagger) // the instances start apart
			}
			locker, closeLocker := newLocker()
			defer closeLocker()
			clock := offsetClock{Clock: clockwork.NewRealClock(), offset: off}
			s, err := gocron.NewScheduler(gocron.WithClock(clock), gocron.WithDistributedLocker(locker))
			if err != nil {
				return err
			}
			scheds = append(scheds, s)
			_, err = s.NewJob(def(), gocron.NewTask(func() {
				rec.record(clock.Now()) // the instance's own reading of the instant
				time.Sleep(jobTime)     // the job's work
			}), gocron.WithName("report"))
			if err != nil {
				return err
			}
			s.Start()
		}
		<-ctx.Done()
		return nil
	}
}

// runGocronCron: a cron job every second ("* * * * * *" with seconds),
// aligned on the clock like mutexfx's Every.
func runGocronCron(newLocker func() (gocron.Locker, func())) func(context.Context, *scenario, *recorder) error {
	return runGocron(newLocker, func() gocron.JobDefinition { return gocron.CronJob("* * * * * *", true) })
}

// runGocronDuration: a duration job every second, planned from each
// scheduler's start.
func runGocronDuration(newLocker func() (gocron.Locker, func())) func(context.Context, *scenario, *recorder) error {
	return runGocron(newLocker, func() gocron.JobDefinition { return gocron.DurationJob(period) })
}
