package component

import (
	"context"
	"errors"
)

// Misuse of the API is a programming error: a method of a Mutex that New
// did not build, of a nil *Lock, or given a nil ctx panics with a message
// naming the mistake (as net/http does for a nil handler), instead of a
// runtime error deep inside. The zero Mutex is not usable — unlike
// sync.Mutex's, it would need a store, and a silent private memory store
// would hide a missing injection — so every method says so.

// ErrNilFunc reports a nil fn given to Do or Run.
var ErrNilFunc = errors.New("mutexfx: nil fn")

// Panic messages.
const (
	msgNoNew   = "mutexfx: Mutex used without New (build it with mutexfx.New or component.New, or take it from the fx module)"
	msgNilCtx  = "mutexfx: nil context.Context (use context.Background() or context.TODO())"
	msgNilLock = "mutexfx: method called on a nil *Lock (Acquire and TryAcquire return a nil Lock only with an error — TryAcquire's wraps ErrLocked when the name is held: check the error before using the Lock)"
	msgNoLock  = "mutexfx: Lock used without Acquire (a Lock comes from Acquire, TryAcquire or Do)"
)

// mustBuilt panics unless New built m.
func (m *Mutex) mustBuilt() {
	if m == nil || m.drv == nil {
		panic(msgNoNew)
	}
}

// mustCtx panics on a nil ctx.
func mustCtx(ctx context.Context) {
	if ctx == nil {
		panic(msgNilCtx)
	}
}

// mustLock panics unless l came from an acquisition.
func (l *Lock) mustLock() {
	if l == nil {
		panic(msgNilLock)
	}
	if l.m == nil {
		panic(msgNoLock)
	}
}
