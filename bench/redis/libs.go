package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/mutexfx/mutexfx/component"
	mredis "github.com/mutexfx/mutexfx/drivers/redis"
)

// locker is one library's way to take a lock, waiting for it. unlock
// releases the lock; its error (a release that failed or found the lock no
// longer held) fails the run.
type locker interface {
	lock(ctx context.Context, name string) (unlock func() error, err error)
	close()
}

// released is the error of a release that reported ok and err: err, or an
// error when the lock was no longer held (lost or expired).
func released(ok bool, err error) error {
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	if !ok {
		return errors.New("release: the lock was no longer held")
	}
	return nil
}

// libs are the measured libraries, in table order.
var libs = []string{"mutexfx", "redsync", "redislock", "rueidislock"}

// open returns a locker of lib on addr. Every worker of an in-process run
// shares it, as an application shares its client or component.
func open(lib, addr string) (locker, error) {
	switch lib {
	case "mutexfx":
		d, err := mredis.New(mredis.Options{Addrs: []string{addr}})
		if err != nil {
			return nil, err
		}
		m, err := component.New(component.Options{Driver: d, Prefix: "bench:", TTL: 8 * time.Second, Timeout: component.Forever})
		if err != nil {
			return nil, err
		}
		return &mutexfxLocker{m: m, d: d}, nil
	case "redsync":
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		return &redsyncLocker{c: c, rs: redsync.New(redsyncgoredis.NewPool(c))}, nil
	case "redislock":
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		return &redislockLocker{c: c, rl: redislock.New(c)}, nil
	case "rueidislock":
		l, err := rueidislock.NewLocker(rueidislock.LockerOption{
			ClientOption: rueidis.ClientOption{InitAddress: []string{addr}},
			KeyMajority:  1,
			KeyValidity:  8 * time.Second,
		})
		if err != nil {
			return nil, err
		}
		return &rueidisLocker{l: l}, nil
	}
	return nil, fmt.Errorf("unknown library %q", lib)
}

type mutexfxLocker struct {
	m *component.Mutex
	d *mredis.Driver
}

func (x *mutexfxLocker) lock(ctx context.Context, name string) (func() error, error) {
	l, err := x.m.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return func() error { return released(l.Release(ctx)) }, nil
}

func (x *mutexfxLocker) close() {
	_ = x.m.Close(context.Background())
	_ = x.d.Close(context.Background())
}

// redsyncLocker: redsync's defaults (8 s expiry, retry after 50-250 ms)
// but unlimited tries, so that a worker waits instead of failing.
type redsyncLocker struct {
	c  *goredis.Client
	rs *redsync.Redsync
}

func (x *redsyncLocker) lock(ctx context.Context, name string) (func() error, error) {
	m := x.rs.NewMutex("bench:"+name, redsync.WithTries(1<<30))
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func() error { return released(m.UnlockContext(ctx)) }, nil
}

func (x *redsyncLocker) close() { _ = x.c.Close() }

// redislockLocker: Obtain retrying every 10 ms (redislock does not retry
// by default; its README suggests a linear backoff).
type redislockLocker struct {
	c  *goredis.Client
	rl *redislock.Client
}

func (x *redislockLocker) lock(ctx context.Context, name string) (func() error, error) {
	l, err := x.rl.Obtain(ctx, "bench:"+name, 8*time.Second, &redislock.Options{RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond)})
	if err != nil {
		return nil, err
	}
	return func() error {
		if err := l.Release(ctx); err != nil { // redislock.ErrLockNotHeld when lost
			return fmt.Errorf("release: %w", err)
		}
		return nil
	}, nil
}

func (x *redislockLocker) close() { _ = x.c.Close() }

// rueidisLocker: one key (KeyMajority 1, a single server), waiting with
// WithContext (woken by client-side caching invalidations).
//
// rueidislock (v1.0.79 and v1.0.80) can lose a waiter's wake-up for good:
// in its try, a failed attempt's monitoring goroutine is started before the
// attempt is counted as failed, and when that goroutine runs first it takes
// the attempt for a successful one ending, decrements the name's gate and
// deletes it while WithContext is about to wait on it. Invalidations then
// signal no gate, and the waiter sleeps until its ctx ends even though the
// lock is free (across processes, where no holder in the same process
// signals the gate, a run of 8 processes failed with "context deadline
// exceeded"). lock therefore bounds each WithContext wait by waitBound, as
// a mutexfx waiter polls every 100 ms: past it, the wait is cancelled and
// WithContext called again, which registers a fresh gate.
type rueidisLocker struct{ l rueidislock.Locker }

// waitBound is how long one WithContext call of rueidisLocker waits for a
// wake-up before it starts again (mutexfx's WaitPollInterval).
const waitBound = 100 * time.Millisecond

func (x *rueidisLocker) lock(ctx context.Context, name string) (func() error, error) {
	for {
		wctx, cancel := context.WithCancel(ctx)
		bound := time.AfterFunc(waitBound, cancel)
		_, release, err := x.l.WithContext(wctx, "bench:"+name)
		if bound.Stop() {
			if err != nil {
				cancel()
				return nil, err
			}
			// The release is release, which returns nothing (rueidislock
			// deletes the key before it returns): a failed release cannot
			// be seen here. cancel ends the lock's context with it.
			return func() error { release(); cancel(); return nil }, nil
		}
		// The bound fired: a lock got in that instant has had its context
		// cancelled (it is being released); wait again.
		if release != nil {
			release()
		}
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

func (x *rueidisLocker) close() { x.l.Close() }
