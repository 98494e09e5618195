package mutexfx_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/rawbytes"
	"github.com/knadh/koanf/v2"
	"go.uber.org/fx"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/drivers/memory"
)

func ExampleModule() {
	k := koanf.New(".")
	_ = k.Load(rawbytes.Provider([]byte(`
mutex:
  orders: {ttl: 30s, timeout: 5s, default: true}
`)), yaml.Parser())

	app := fx.New(
		fx.NopLogger,
		mutexfx.Module(k),
		fx.Invoke(func(m *mutexfx.Mutex) error { // the default store, also name:"orders"
			return m.Do(context.Background(), "order:42", func(ctx context.Context, l *mutexfx.Lock) error {
				fmt.Println("paying order 42 in store", m.Name())
				return nil
			})
		}),
	)
	if err := app.Err(); err != nil {
		fmt.Println(err) // invalid configuration fails here, naming the key path
		return
	}
	_ = app.Start(context.Background())
	_ = app.Stop(context.Background()) // releases what the stores hold, closes them
	// Output: paying order 42 in store orders
}

func ExampleMutex_Acquire() {
	ctx := context.Background()
	m, _ := mutexfx.New(mutexfx.Options{})
	defer m.Close(ctx)

	lock, err := m.Acquire(ctx, "order:42", mutexfx.WithTimeout(3*time.Second))
	if errors.Is(err, mutexfx.ErrTimeout) {
		fmt.Println("someone else is paying order 42")
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lock.Release(ctx)
	fmt.Println("holding", lock.Name(), "fence", lock.Fence())
	// Output: holding order:42 fence 1
}

func ExampleMutex_TryAcquire() {
	ctx := context.Background()
	m, _ := mutexfx.New(mutexfx.Options{})
	defer m.Close(ctx)

	first, _ := m.TryAcquire(ctx, "cleanup")
	_, err := m.TryAcquire(ctx, "cleanup") // not reentrant: ErrLocked
	fmt.Println(first != nil, errors.Is(err, mutexfx.ErrLocked))
	ok, _ := first.Release(ctx)
	again, _ := first.Release(ctx)
	fmt.Println(ok, again)
	// Output:
	// true true
	// true false
}

func ExampleMutex_Do() {
	ctx := context.Background()
	m, _ := mutexfx.New(mutexfx.Options{})
	defer m.Close(ctx)

	err := m.Do(ctx, "report:daily", func(ctx context.Context, l *mutexfx.Lock) error {
		// ctx ends (cause ErrLost) if the lock is lost: pass it to the work.
		return errors.New("report failed")
	})
	fmt.Println(err)
	fmt.Println(len(m.Held()), "locks held") // released although fn failed
	// Output:
	// report failed
	// 0 locks held
}

func ExampleLock_Context() {
	ctx := context.Background()
	store := memory.New()
	m, _ := mutexfx.New(mutexfx.Options{Driver: store})
	defer m.Close(ctx)

	lock, _ := m.Acquire(ctx, "migration")
	store.Revoke(lock.Key()) // as if the store had lost it
	<-lock.Context().Done()
	fmt.Println(errors.Is(context.Cause(lock.Context()), mutexfx.ErrLost), lock.Held())
	// Output: true false
}
