// Command quickstart shows mutexfx with no setup (the memory store): try,
// acquire with a timeout, run a function holding a lock, and the lost
// signal. It exits 0.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx := context.Background()
	store := memory.New() // shared by the two components below, like a Redis server
	a, err := mutexfx.New(mutexfx.Options{Driver: store, Name: "a"})
	if err != nil {
		return err
	}
	defer a.Close(ctx)
	b, err := mutexfx.New(mutexfx.Options{Driver: store, Name: "b", Timeout: 200 * time.Millisecond})
	if err != nil {
		return err
	}
	defer b.Close(ctx)

	// Acquire: wait (up to the timeout) for the lock.
	lock, err := a.Acquire(ctx, "order:42")
	if err != nil {
		return err
	}
	fmt.Printf("a holds %q, fencing token %d\n", lock.Name(), lock.Fence())

	// TryAcquire: one attempt, ErrLocked when someone else holds it.
	if other, err := b.TryAcquire(ctx, "order:42"); !errors.Is(err, mutexfx.ErrLocked) {
		return fmt.Errorf("TryAcquire of a held lock = %v, %v; want ErrLocked", other, err)
	}
	fmt.Println("b: TryAcquire says order:42 is taken")

	// Acquire with a timeout: ErrTimeout (HTTP 409 in the middleware).
	if _, err := b.Acquire(ctx, "order:42"); !errors.Is(err, mutexfx.ErrTimeout) {
		return fmt.Errorf("acquiring a held lock: %v; want ErrTimeout", err)
	}
	fmt.Println("b: gave up after 200ms")

	// Release once: the second call reports false.
	first, err1 := lock.Release(ctx)
	second, err2 := lock.Release(ctx)
	if !first || second || err1 != nil || err2 != nil {
		return fmt.Errorf("releasing twice: %v, %v, then %v, %v; want true, then false", first, err1, second, err2)
	}
	fmt.Printf("a released order:42 (%v), again (%v)\n", first, second)

	// Do: acquire, run, release — even when fn fails or panics.
	err = b.Do(ctx, "report:daily", func(ctx context.Context, l *mutexfx.Lock) error {
		fmt.Printf("b runs the daily report holding %q (fence %d)\n", l.Name(), l.Fence())
		return nil
	})
	if err != nil {
		return err
	}

	// The lost signal: a lock's context ends with ErrLost when the store no
	// longer holds it for us (here the store drops it on purpose).
	lock, err = a.Acquire(ctx, "migration")
	if err != nil {
		return err
	}
	store.Revoke(lock.Key())
	select {
	case <-lock.Done():
		if !errors.Is(lock.Err(), mutexfx.ErrLost) {
			return fmt.Errorf("lock ended with %v; want ErrLost", lock.Err())
		}
		fmt.Println("a lost \"migration\":", context.Cause(lock.Context()))
	case <-time.After(5 * time.Second):
		return errors.New("no lost signal")
	}
	if n := len(a.Held()); n != 0 {
		return fmt.Errorf("a holds %d locks; want 0", n)
	}
	fmt.Println("held by a now: 0 locks")
	return nil
}
