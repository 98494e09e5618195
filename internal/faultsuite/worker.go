//go:build linux

package faultsuite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/mutexfx/mutexfx/component"
)

// worker is one holder loop: it acquires a random lock of locks, writes
// under its fence every ttl/20 while Lock.Err says it holds, for a random
// time from ttl/4 to 1¼ ttl (so that renewals happen), then releases —
// or records that it was told lost.
type worker struct {
	proc  string // process incarnation
	id    int
	locks []string
	ttl   time.Duration
	m     *component.Mutex
	w     Writer
	emit  func(Event)
	rng   *rand.Rand
}

// run loops until ctx ends; it returns an error only when the register is
// unreachable (the run is over or broken).
func (k *worker) run(ctx context.Context) error {
	for seq := 0; ctx.Err() == nil; seq++ {
		lock := k.locks[k.rng.IntN(len(k.locks))]
		holder := fmt.Sprintf("%s/w%d/%d", k.proc, k.id, seq)
		l, err := k.m.Acquire(ctx, lock, component.WithTimeout(4*k.ttl))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !errors.Is(err, component.ErrTimeout) {
				k.emit(Event{T: Now(), Kind: AcquireError, Proc: k.proc, Lock: lock, Detail: err.Error()})
				sleep(ctx, k.ttl/10)
			}
			continue
		}
		k.emit(Event{T: Now(), Kind: Acquired, Proc: k.proc, Holder: holder, Lock: lock, Fence: l.Fence()})
		if err := k.hold(ctx, l, holder); err != nil {
			return err
		}
	}
	return nil
}

// hold writes under l until its time is up, ctx ends or it is told lost.
func (k *worker) hold(ctx context.Context, l *component.Lock, holder string) error {
	until := time.Now().Add(k.ttl/4 + time.Duration(k.rng.Int64N(int64(k.ttl))))
	tick := time.NewTicker(k.ttl / 20)
	defer tick.Stop()
	for {
		if err := l.Err(); err != nil {
			k.emit(Event{T: Now(), Kind: Lost, Proc: k.proc, Holder: holder, Lock: l.Name(), Detail: err.Error()})
			return nil
		}
		if ctx.Err() != nil || !time.Now().Before(until) {
			break
		}
		if _, err := k.w.Write(l.Name(), l.Fence(), holder); err != nil {
			return err
		}
		select {
		case <-l.Done():
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	k.emit(Event{T: Now(), Kind: Releasing, Proc: k.proc, Holder: holder, Lock: l.Name()})
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*k.ttl)
	defer cancel()
	ok, err := l.Release(rctx)
	e := Event{T: Now(), Kind: Released, Proc: k.proc, Holder: holder, Lock: l.Name(), OK: ok}
	if err != nil {
		e.Detail = err.Error()
	}
	k.emit(e)
	return nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
