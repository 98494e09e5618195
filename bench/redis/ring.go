package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ring is the pseudo-library of the fair hand-off floor: no lock at all,
// only a baton passed round the worker processes by Pub/Sub. Worker i
// waits for a message on its own channel, "holds", then publishes to
// worker i+1's. Every hand-off is one PUBLISH and the wake-up of the next
// process, with no script, no state and no safety: no lock whose every
// hand-off goes to another waiting process through Redis can be faster on
// this machine, so its acquisitions/s bound what a fair lock can reach
// here. Only the process contention runs it.
const ring = "ring"

// errRunOver ends a ring worker's last wait: the run ended while it was
// waiting for a baton that will not come.
var errRunOver = errors.New("run over")

// ringLocker is worker id of a ring of n on the run's lock name.
type ringLocker struct {
	c      *goredis.Client
	ps     *goredis.PubSub
	name   string
	id, n  int
	end    time.Time // the run's end: a wait past it is over
	holder bool      // id 0 holds the baton at the start
}

// openRing subscribes worker id's channel of name, so that every worker
// listens before the run starts.
func openRing(addr, name string, id, n int, end time.Time) (*ringLocker, error) {
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	ps := c.Subscribe(ctx, ringChannel(name, id))
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		_ = c.Close()
		return nil, err
	}
	return &ringLocker{c: c, ps: ps, name: name, id: id, n: n, end: end, holder: id == 0}, nil
}

func ringChannel(name string, id int) string { return "bench:" + name + ":" + strconv.Itoa(id) }

// lock waits for the baton; names other than the run's (the warm-up) are
// taken at once.
func (x *ringLocker) lock(ctx context.Context, name string) (func() error, error) {
	if name != x.name {
		return func() error { return nil }, nil
	}
	if x.holder {
		x.holder = false
	} else {
		for {
			wait := time.Until(x.end) + time.Second
			if wait <= 0 {
				return nil, errRunOver
			}
			msg, err := x.ps.ReceiveTimeout(ctx, wait)
			if err != nil {
				if time.Now().After(x.end) {
					return nil, errRunOver
				}
				return nil, err
			}
			if _, ok := msg.(*goredis.Message); ok {
				break
			}
		}
	}
	return func() error {
		return x.c.Publish(ctx, ringChannel(x.name, (x.id+1)%x.n), "b").Err()
	}, nil
}

func (x *ringLocker) close() {
	_ = x.ps.Close()
	_ = x.c.Close()
}

// openWorker opens lib for worker id of n on name in a run ending at end.
func openWorker(lib, addr, name string, id, n int, end time.Time) (locker, error) {
	if lib == ring {
		return openRing(addr, name, id, n, end)
	}
	return open(lib, addr)
}

// ringErr is an error naming the ring floor's failure.
func ringErr(err error) error { return fmt.Errorf("hand-off ring: %w", err) }
