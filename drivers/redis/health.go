package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ErrUnavailable is returned at once, without a network call, while the
// driver's client is reconnecting after a network error: a probe pings the
// server in the background and clears the state when it answers. Calls thus
// fail fast instead of each waiting for a dial or read timeout.
var ErrUnavailable = errors.New("redis: unreachable, reconnecting")

// probeInterval is the pause between two probes of a down server.
const probeInterval = 200 * time.Millisecond

// probeTimeout bounds one probe (and so how long Close may wait for it).
const probeTimeout = time.Second

// health tracks whether the server was reachable at the last call.
type health struct {
	d       *Driver
	down    atomic.Bool
	lastErr atomic.Pointer[string]

	mu sync.Mutex
	up chan struct{} // closed when the server answers again; nil while up
}

func newHealth(d *Driver) *health { return &health{d: d} }

// check fails at once when the driver is closed or reconnecting.
func (h *health) check() error {
	if h.d.isClosed() {
		return ErrClosed
	}
	if h.down.Load() {
		if msg := h.lastErr.Load(); msg != nil {
			return fmt.Errorf("%w (last error: %s)", ErrUnavailable, *msg)
		}
		return ErrUnavailable
	}
	return nil
}

// observe looks at a call's error: a network error while the caller's
// context is still live marks the server down and starts the probe. It
// returns err unchanged.
func (h *health) observe(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil || !isNetworkError(err) {
		return err
	}
	msg := err.Error()
	h.lastErr.Store(&msg)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down.Load() {
		return err
	}
	d := h.d
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return err
	}
	d.wg.Add(1)
	d.mu.Unlock()
	h.down.Store(true)
	h.up = make(chan struct{})
	go h.probe()
	return err
}

// wait returns when the server is up (at once if it is) or ctx ends.
func (h *health) wait(ctx context.Context) error {
	h.mu.Lock()
	up := h.up
	h.mu.Unlock()
	if up == nil {
		return nil
	}
	select {
	case <-up:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// probe pings the server until it answers or the driver closes.
func (h *health) probe() {
	defer h.d.wg.Done()
	for {
		ctx, cancel := context.WithTimeout(h.d.ctx, probeTimeout)
		err := h.d.client.Ping(ctx).Err()
		cancel()
		if err == nil {
			h.mu.Lock()
			h.down.Store(false)
			close(h.up)
			h.up = nil
			h.mu.Unlock()
			return
		}
		msg := err.Error()
		h.lastErr.Store(&msg)
		select {
		case <-h.d.ctx.Done():
			return
		case <-time.After(probeInterval):
		}
	}
}

// isNetworkError reports whether err says the connection failed (as
// opposed to a server reply or a cancelled context). Callers rule out the
// end of their own context first: a deadline error while that context is
// live is the client's own dial or read timeout (a dial timeout also
// matches context.DeadlineExceeded), so the server is unreachable.
func isNetworkError(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, goredis.ErrPoolTimeout) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
