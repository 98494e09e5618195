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

// Grants (docs/postgres.md): a release may hand the row to the head of its
// queue when that waiting call registered (its token, ttl and listener pid).
// Only a live listener backend is granted, so a crashed waiter is skipped; a
// hung one, or one that cannot leave, holds a grant for its ttl, as a hung
// holder holds its lock.

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
	granted := false
	found, err := d.queryRow(ctx, func(querier) (string, []any) { return d.sql.leave, []any{sqlkit.KeyHash(req.Key), d.id, req.Token} }, &granted)
	if err == nil && found && granted {
		_, _ = d.Release(ctx, req.Key, req.Token)
	}
}
