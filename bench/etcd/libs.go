package main

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/etcd"
)

// benchTTL is the lock ttl (session ttl of concurrency) of every run.
const benchTTL = 10 * time.Second

// locker is one library's lock, opened once per process.
type locker interface {
	// lock takes name and returns its unlock.
	lock(ctx context.Context, name string) (func(context.Context) error, error)
	close()
}

func open(lib string, eps []string) (locker, error) {
	switch lib {
	case "mutexfx":
		d, err := etcd.New(etcd.Options{Endpoints: eps}, nil)
		if err != nil {
			return nil, err
		}
		m, err := component.New(component.Options{Driver: d, TTL: benchTTL, Prefix: "bench/"})
		if err != nil {
			return nil, err
		}
		return mutexfx{m}, nil
	case "concurrency":
		cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
		if err != nil {
			return nil, err
		}
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(benchTTL/time.Second)))
		if err != nil {
			_ = cli.Close()
			return nil, err
		}
		return &conc{cli: cli, s: s}, nil
	}
	return nil, fmt.Errorf("unknown library %q", lib)
}

type mutexfx struct{ m *component.Mutex }

func (x mutexfx) lock(ctx context.Context, name string) (func(context.Context) error, error) {
	l, err := x.m.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := l.Release(ctx)
		if err == nil && !ok {
			err = fmt.Errorf("release of %q: not held", name)
		}
		return err
	}, nil
}

func (x mutexfx) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = x.m.Close(ctx)
}

// conc is etcd's concurrency.Mutex on one session (one lease) per process,
// as its documentation uses it: a new Mutex per lock call.
type conc struct {
	cli *clientv3.Client
	s   *concurrency.Session
}

func (c *conc) lock(ctx context.Context, name string) (func(context.Context) error, error) {
	m := concurrency.NewMutex(c.s, "bench-concurrency/"+name)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

func (c *conc) close() {
	_ = c.s.Close()
	_ = c.cli.Close()
}
