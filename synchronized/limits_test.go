package synchronized_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/redis"
	"github.com/mutexfx/mutexfx/internal/testutil"
	"github.com/mutexfx/mutexfx/synchronized"
)

// payInput is an action's input whose ID is read by the key "id".
type payInput struct {
	ID string `json:"id"`
}

// TestLongNameIs400: a request whose values make a lock name longer than
// the store's maxNameLength is the client's input, answered 400
// (E_MUTEX_LOCK_NAME) as a missing value is, not 500; an action called
// with such an input fails with ErrLockName.
func TestLongNameIs400(t *testing.T) {
	t.Parallel()
	m, _ := newMutex(t)
	long := strings.Repeat("7", component.DefaultMaxNameLength)
	srv := serve(t, "POST /orders/{id}/pay", "order:{id}", synchronized.Options{Mutex: m},
		func(http.ResponseWriter, *http.Request) { t.Error("handler called") })
	resp, body := post(t, srv, "/orders/"+long+"/pay")
	if resp == nil {
		return
	}
	if p := problemOf(t, resp, body); p.Status != http.StatusBadRequest || p.Code != synchronized.CodeLockName {
		t.Errorf("a %d-byte id: problem %+v, want 400 %s", len(long), p, synchronized.CodeLockName)
	}

	pay, err := synchronized.Wrap("order:{id}", synchronized.Options{Mutex: m},
		func(context.Context, payInput) (int, error) { t.Error("action ran"); return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pay(context.Background(), payInput{ID: long}); !errors.Is(err, synchronized.ErrLockName) ||
		!errors.Is(err, component.ErrNameTooLong) {
		t.Errorf("a %d-byte id: err = %v, want ErrLockName and ErrNameTooLong", len(long), err)
	}
}

// TestTTLBelowStoreFloor: a TTL the package accepts (10 ms at least) but
// the store cannot serve (Redis: 250 ms) fails at construction, naming
// the option, rather than in every request (500) or call.
func TestTTLBelowStoreFloor(t *testing.T) {
	t.Parallel()
	drv, err := redis.New(redis.Options{Addrs: []string{testutil.RedisAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := component.New(component.Options{Driver: drv, Name: "orders", Prefix: "mutexfx:test:" + t.Name() + ":"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	floor := m.Features().MinTTL
	opts := synchronized.Options{Mutex: m, TTL: floor / 2}
	if mw, err := synchronized.Middleware("order:{id}", opts); !errors.Is(err, component.ErrInvalidOption) {
		answer := "-"
		if err == nil { // what each request would get
			r := httptest.NewRequest(http.MethodPost, "/orders/1", nil)
			r.SetPathValue("id", "1")
			rec := httptest.NewRecorder()
			mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(rec, r)
			answer = strconv.Itoa(rec.Code) + " " + strings.TrimSpace(rec.Body.String())
		}
		t.Errorf("Middleware with TTL %v, the store's floor %v: err = %v, want ErrInvalidOption (a request gets: %s)",
			opts.TTL, floor, err, answer)
	}
	if _, err := synchronized.Wrap("order:{id}", opts, func(context.Context, payInput) (int, error) { return 0, nil }); !errors.Is(err, component.ErrInvalidOption) {
		t.Errorf("Wrap with TTL %v, the store's floor %v: err = %v, want ErrInvalidOption", opts.TTL, floor, err)
	}
	opts.TTL = floor
	if _, err := synchronized.Middleware("order:{id}", opts); err != nil {
		t.Errorf("Middleware with the store's floor as TTL: %v", err)
	}
}
