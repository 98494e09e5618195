package postgres

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/sqlkit"
)

// Hand-off in one statement. A waiting call registers its token and ttl in
// its driver's queue entry, with the backend pid of the driver's LISTEN
// connection. A release whose queue's head registered, and whose listener
// backend is alive, sets the row for that token (the next fence, the
// waiter's ttl) and notifies the driver's grantChannel: the waiter holds
// the lock on receipt and sends nothing. A call whose wait ends without the
// lock unregisters (leave: its driver's entry keeps its place until it
// dies, for the driver's next call), releasing a lock granted meanwhile. A
// crashed waiter's listener backend is gone, so it is not granted; a
// waiter whose process hangs, or that cannot leave (the store unreachable),
// can hold a grant for its ttl, as a hung holder holds its lock.

// leaveTimeout bounds a leave, which runs after the call's ctx ended.
const leaveTimeout = 5 * time.Second

// grants are the waiting calls a release may grant a lock, by token.
type grants struct {
	mu    sync.Mutex
	calls map[string]chan uint64
}

// add registers a waiting call of token: the channel its grant's fence
// arrives on, and its removal.
func (g *grants) add(token string) (<-chan uint64, func()) {
	ch := make(chan uint64, 1)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.calls == nil {
		g.calls = map[string]chan uint64{}
	}
	g.calls[token] = ch
	return ch, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.calls[token] == ch {
			delete(g.calls, token)
		}
	}
}

// deliver hands a grant notification, "fence,token", to its call. A call
// gone meanwhile left the queue, releasing the lock (leave).
func (g *grants) deliver(payload string) {
	f, token, ok := strings.Cut(payload, ",")
	fence, err := strconv.ParseUint(f, 10, 64)
	if !ok || err != nil || fence == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case g.calls[token] <- fence: // a nil channel (no such call) is never ready
	default:
	}
}

// registration is the listener pid a waiting call of req registers in its
// queue entry, or nil (no grant: its release wakes it instead) when no
// LISTEN connection is up or the grant's payload would not fit a NOTIFY.
func (d *tableDriver) registration(req drivers.AcquireRequest) any {
	pid := d.listenPID.Load()
	if pid == 0 || payload(req.Token) == "" || len(req.Token) > maxPayload-21 {
		return nil
	}
	return int32(pid)
}

// leave unregisters a waiting call that ends without the lock from its
// queue entry, and releases the lock if a release granted it meanwhile.
func (d *tableDriver) leave(ctx context.Context, req drivers.AcquireRequest) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
	defer cancel()
	var granted bool
	err := d.run(ctx, func(ctx context.Context, p querier) error {
		granted = false
		return ignoreNoRows(p.QueryRow(ctx, d.sql.leave, sqlkit.KeyHash(req.Key), d.id, req.Token).Scan(&granted))
	})
	if err == nil && granted {
		_, _ = d.Release(ctx, req.Key, req.Token)
	}
}
