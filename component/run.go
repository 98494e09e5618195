package component

import "context"

// Do acquires the lock name as Acquire does, runs fn, and releases the lock
// whether fn returned, failed or panicked (the panic goes on after the
// release). A failure of the release is ignored: the lock then expires in
// the store. A nil fn returns ErrNilFunc, acquiring nothing.
//
// fn's ctx carries ctx's values and deadline, and the lock (LockFrom). It
// ends in the same call that ends the lock — cause wrapping ErrLost when the
// lock is lost, ErrReleased once Do releases it — or when ctx ends (with
// ctx's Err and cause). Like the lock's context (Lock.Context), its Err checks the lock's
// tracked expiry: fn is never told "held" past it.
func (m *Mutex) Do(ctx context.Context, name string, fn func(ctx context.Context, l *Lock) error, opts ...AcquireOption) error {
	m.mustBuilt()
	mustCtx(ctx)
	if fn == nil {
		return ErrNilFunc
	}
	ctx, span := m.tel.start(ctx, spanDo)
	err := m.do(ctx, name, fn, opts)
	m.tel.endSpan(span, name, err)
	return err
}

func (m *Mutex) do(ctx context.Context, name string, fn func(ctx context.Context, l *Lock) error, opts []AcquireOption) error {
	l, err := m.Acquire(ctx, name, opts...)
	if err != nil {
		return err
	}
	return Run(ctx, l, fn)
}

// Run runs fn holding the acquired lock l, as Do does, and releases l.
func Run(ctx context.Context, l *Lock, fn func(ctx context.Context, l *Lock) error) error {
	mustCtx(ctx)
	l.mustLock()
	if fn == nil {
		_, _ = l.Release(ctx)
		return ErrNilFunc
	}
	fnCtx, cancel := newRunContext(ctx, l)
	defer func() {
		// Release ends fnCtx with the lock, before it asks the store.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), attemptGrace)
		_, _ = l.Release(rctx)
		rcancel()
		cancel(nil)
	}()
	return fn(fnCtx, l)
}

// runContext is the context Run gives fn: a child of the caller's ctx
// (its values, deadline and end, with the caller's Err and cause), carrying
// the lock, which the call that ends the lock cancels too, with the lock's
// cause (Lock.runs). Its Err checks the lock's tracked expiry as
// lockContext.Err does.
type runContext struct {
	context.Context
	l *Lock
}

// newRunContext returns fn's context for l under caller, and its cancel.
func newRunContext(caller context.Context, l *Lock) (runContext, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(WithLock(caller, l))
	m := l.m
	m.mu.Lock()
	if l.cause != nil { // ended, or being released
		cancel(l.cause)
	} else {
		l.runs = append(l.runs, cancel)
	}
	m.mu.Unlock()
	return runContext{ctx, l}, cancel
}

// Err returns nil while the caller's ctx is live and the lock is held and
// not past its tracked expiry; then the caller's Err when it ended first,
// else context.Canceled (context.Cause tells why). A lock past its expiry
// is ended as lost there and then, which cancels this context in the same
// call.
func (c runContext) Err() error { return expiringErr(c.Context, c.l) }
