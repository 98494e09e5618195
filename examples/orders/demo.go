package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/fx"

	"github.com/mutexfx/mutexfx"
)

// demoFailed is set when the demo did not see what it expected.
var demoFailed atomic.Bool

// demoRequest is one request of the demo.
type demoRequest struct {
	path  string
	auth  bool
	after string // sent once this lock is held (by another request)
	want  int
}

// runDemo sends concurrent requests once the server listens, prints the
// answers, waits for a run of the exclusive schedule and stops the app.
func runDemo(lc fx.Lifecycle, sd fx.Shutdowner, srv *Server, o *Orders, m *mutexfx.Mutex) {
	var wg sync.WaitGroup
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			wg.Go(func() {
				ok := demo(srv.Addr(), o, m)
				demoFailed.Store(!ok)
				_ = sd.Shutdown()
			})
			return nil
		},
		OnStop: func(context.Context) error { wg.Wait(); return nil },
	})
}

func demo(addr string, o *Orders, m *mutexfx.Mutex) bool {
	fmt.Printf("orders demo: store %q (%T), server on %s\n\n", m.Name(), m.Driver(), addr)
	reqs := []demoRequest{
		{"/orders/42/pay", true, "", http.StatusOK},
		{"/orders/42/pay", true, "", http.StatusOK},
		{"/orders/42/pay", true, "", http.StatusOK},
		{"/orders/7/pay", true, "", http.StatusOK},
		{"/orders/42/refund", true, "order:42", http.StatusConflict},
		{"/orders/42/pay", false, "", http.StatusUnauthorized},
	}
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	start := time.Now()
	var mu sync.Mutex
	ok := true
	var wg sync.WaitGroup
	for _, rq := range reqs {
		wg.Go(func() {
			if rq.after != "" {
				waitHeld(m, rq.after)
			}
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+rq.path, nil)
			auth := "anonymous"
			if rq.auth {
				req.Header.Set("Authorization", "Bearer demo")
				auth = "user demo"
			}
			sent := time.Since(start)
			resp, err := client.Do(req)
			if err != nil {
				mu.Lock()
				fmt.Printf("  POST %-18s %v\n", rq.path, err)
				ok = false
				mu.Unlock()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			fmt.Printf("  %5.2fs→%5.2fs  POST %-18s %-9s  %d %s\n", sent.Seconds(), time.Since(start).Seconds(), rq.path, auth, resp.StatusCode, strings.TrimSpace(string(body)))
			if resp.StatusCode != rq.want {
				fmt.Printf("    unexpected: want %d\n", rq.want)
				ok = false
			}
		})
	}
	wg.Wait()
	charges := o.charges.Load()
	fmt.Printf("\npayments charged: %d for 4 authorised payment requests on 2 orders\n", charges)
	fmt.Println("  order 42: three concurrent requests ran one at a time under lock \"order:42\"; one charged, the others found it paid")
	fmt.Println("  order 7 ran in parallel with them; the refund of 42 gave up at once (NoWait) while a payment held the lock: 409")
	if charges != 2 {
		ok = false
	}
	if !checkOps(client, addr) {
		ok = false
	}
	select {
	case at := <-o.expired:
		fmt.Printf("\nschedule \"orders.expire\" (exclusive, lock \"schedule:orders.expire\", every 500ms) ran at %s\n", at.Format("15:04:05.000"))
	case <-time.After(5 * time.Second):
		fmt.Println("\nschedule \"orders.expire\" did not run within 5 s")
		ok = false
	}
	return ok
}

// waitHeld waits (2 s at most) until m holds the lock name.
func waitHeld(m *mutexfx.Mutex, name string) {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, l := range m.Held() {
			if l.Name() == name {
				return
			}
		}
	}
}

// checkOps checks the operator's endpoints: /readyz answers 200 and
// /metrics has the lock wait histogram of the payments.
func checkOps(client *http.Client, addr string) bool {
	ok := true
	for _, c := range []struct{ path, want string }{
		{"/readyz", `"ready":true`},
		{"/metrics", `mutexfx_acquire_duration_seconds_count{mutexfx_driver=`},
	} {
		resp, err := client.Get("http://" + addr + c.path)
		if err != nil {
			fmt.Printf("GET %s: %v\n", c.path, err)
			ok = false
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), c.want) {
			fmt.Printf("GET %s: %d, no %s in:\n%s\n", c.path, resp.StatusCode, c.want, body)
			ok = false
		}
	}
	return ok
}
