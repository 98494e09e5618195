package synchronized_test

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/internal/testutil"
	"github.com/mutexfx/mutexfx/synchronized"
)

type customer struct {
	ID string `json:"customer_id"`
}

type Audit struct {
	Actor string
}

type order struct {
	Audit
	ID       int64     `json:"id"`
	Customer *customer `json:"customer"`
	Region   string    `json:"region,omitempty"`
	Addr     netip.Addr
	Extra    map[string]any `json:"extra"`
	Any      any
	Items    []string
}

// lockName runs an action wrapped with tmpl on in and returns the name of
// the lock it held.
func lockName[In any](t *testing.T, m *component.Mutex, tmpl string, in In) (string, error) {
	t.Helper()
	act, err := synchronized.Wrap(tmpl, synchronized.Options{Mutex: m}, func(ctx context.Context, in In) (string, error) {
		return synchronized.LockFrom(ctx).Name(), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return act(context.Background(), in)
}

func TestWrapNames(t *testing.T) {
	m, _ := newMutex(t)
	o := order{
		Audit: Audit{Actor: "ann"}, ID: 42, Customer: &customer{ID: "c7"}, Region: "eu",
		Addr: netip.MustParseAddr("10.0.0.1"), Extra: map[string]any{"shop": map[string]any{"id": 3}},
		Any: map[string]any{"k": "v"},
	}
	tests := []struct {
		tmpl string
		want string
	}{
		{"order:{ID}", "order:42"},
		{"order:{id}", "order:42"},
		{"{region}/{Region}", "eu/eu"},
		{"c:{customer.customer_id}", "c:c7"},
		{"c:{Customer.ID}", "c:c7"},
		{"by:{Actor}", "by:ann"},
		{"by:{Audit.Actor}", "by:ann"},
		{"ip:{Addr}", "ip:10.0.0.1"},
		{"shop:{extra.shop.id}", "shop:3"},
		{"any:{Any.k}", "any:v"},
	}
	for _, tt := range tests {
		t.Run(tt.tmpl, func(t *testing.T) {
			got, err := lockName(t, m, tt.tmpl, o)
			if err != nil || got != tt.want {
				t.Errorf("struct: %q, %v; want %q", got, err, tt.want)
			}
			got, err = lockName(t, m, tt.tmpl, &o)
			if err != nil || got != tt.want {
				t.Errorf("pointer: %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	t.Run("map", func(t *testing.T) {
		in := map[string]any{"id": 5, "user": map[string]any{"name": "bo"}}
		got, err := lockName(t, m, "u:{user.name}:{id}", in)
		if err != nil || got != "u:bo:5" {
			t.Errorf("%q, %v", got, err)
		}
	})
	t.Run("scalar map", func(t *testing.T) {
		got, err := lockName(t, m, "{a}", map[string]string{"a": "x"})
		if err != nil || got != "x" {
			t.Errorf("%q, %v", got, err)
		}
	})
}

func TestWrapMissingField(t *testing.T) {
	m, _ := newMutex(t)
	tests := []struct {
		name string
		tmpl string
		in   order
	}{
		{"nil pointer", "c:{customer.customer_id}", order{}},
		{"empty string", "r:{region}", order{}},
		{"absent key", "s:{extra.shop}", order{Extra: map[string]any{}}},
		{"nil map", "s:{extra.shop}", order{}},
		{"nil interface", "a:{Any.k}", order{}},
		{"unusable dynamic value", "a:{Any.k}", order{Any: map[string]any{"k": []int{1}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := lockName(t, m, tt.tmpl, tt.in); !errors.Is(err, synchronized.ErrLockName) {
				t.Fatalf("err = %v, want ErrLockName", err)
			}
		})
	}
	t.Run("nil input pointer", func(t *testing.T) {
		if _, err := lockName[*order](t, m, "o:{id}", nil); !errors.Is(err, synchronized.ErrLockName) {
			t.Fatalf("err = %v, want ErrLockName", err)
		}
	})
}

func TestWrapConstructionErrors(t *testing.T) {
	m, _ := newMutex(t)
	noop := func(context.Context, order) (int, error) { return 0, nil }
	for _, tmpl := range []string{"o:{missing}", "o:{Items}", "o:{Customer}", "o:{id.x}", "o:{audit}", "o:{", "o:{}"} {
		t.Run(tmpl, func(t *testing.T) {
			if _, err := synchronized.Wrap(tmpl, synchronized.Options{Mutex: m}, noop); !errors.Is(err, synchronized.ErrTemplate) {
				t.Fatalf("err = %v, want ErrTemplate", err)
			}
		})
	}
	if _, err := synchronized.Wrap("o:{id}", synchronized.Options{}, noop); !errors.Is(err, synchronized.ErrNoStore) {
		t.Fatalf("no store: err = %v", err)
	}
}

func TestWrapSerialisesAndTimesOut(t *testing.T) {
	m, _ := newMutex(t)
	var inflight, most atomic.Int32
	entered, gate := make(chan struct{}, 5), make(chan struct{})
	pay, err := synchronized.WrapFunc(func(id int) (string, error) { return "pay:" + string(rune('0'+id)), nil },
		synchronized.Options{Mutex: m},
		func(ctx context.Context, id int) (int, error) {
			n := inflight.Add(1)
			defer inflight.Add(-1)
			for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
			}
			entered <- struct{}{}
			<-gate // the work lasts until the other calls wait
			return id * 2, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			if out, err := pay(context.Background(), 1); err != nil || out != 2 {
				t.Errorf("pay = %d, %v", out, err)
			}
		})
	}
	<-entered
	testutil.Poll(t, 5*time.Second, "four calls waiting for the lock", func() bool { return m.Waiters("pay:1") == 4 })
	if n := inflight.Load(); n != 1 {
		t.Errorf("%d calls in the work while the others wait, want 1", n)
	}
	close(gate)
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d calls ran at once", most.Load())
	}

	held, err := m.TryAcquire(context.Background(), "pay:1")
	if err != nil || held == nil {
		t.Fatal(held, err)
	}
	defer held.Release(context.Background())
	for _, opts := range []synchronized.Options{{Mutex: m, NoWait: true}, {Mutex: m, Timeout: 30 * time.Millisecond}} {
		try, err := synchronized.WrapFunc(func(id int) (string, error) { return "pay:1", nil }, opts,
			func(context.Context, int) (int, error) { t.Error("ran without the lock"); return 0, nil })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := try(context.Background(), 1); !errors.Is(err, mutexfx.ErrTimeout) {
			t.Errorf("err = %v, want ErrTimeout", err)
		}
	}
	failing, err := synchronized.WrapFunc(func(int) (string, error) { return "", errors.New("no name") }, synchronized.Options{Mutex: m},
		func(context.Context, int) (int, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := failing(context.Background(), 1); !errors.Is(err, synchronized.ErrLockName) {
		t.Errorf("err = %v, want ErrLockName", err)
	}
}

func TestWrapRegistryDefault(t *testing.T) {
	m, _ := newMutex(t)
	reg := mutexfx.NewRegistry(map[string]*mutexfx.Mutex{"orders": m}, "orders")
	act, err := synchronized.Wrap("o:{id}", synchronized.Options{Resolver: reg}, func(ctx context.Context, in order) (int64, error) {
		return in.ID, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := act(context.Background(), order{ID: 9}); err != nil || got != 9 {
		t.Fatalf("%d, %v", got, err)
	}
	if _, err := synchronized.Wrap("o:{id}", synchronized.Options{Resolver: reg, Store: "nope"}, func(context.Context, order) (int, error) { return 0, nil }); !errors.Is(err, mutexfx.ErrStoreNotFound) {
		t.Fatalf("err = %v, want ErrStoreNotFound", err)
	}
}
