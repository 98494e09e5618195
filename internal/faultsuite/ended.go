//go:build linux

package faultsuite

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// lostMessage is the message the component logs as it ends a lock as lost
// (component.Mutex's Logger), with the fields "lock", "fence" and "cause".
const lostMessage = "mutex lock lost"

// endedCore is a child's Mutex logger: it turns each "lock lost" line into
// an Ended event, stamped in the goroutine that ends the lock, under the
// Mutex's lock and before the lock's context is cancelled — from then on
// Lock.Err returns an error — however long the holder's own goroutine then
// waits for a CPU to see it.
type endedCore struct {
	proc string
	emit func(Event)
}

// endedLogger returns the logger of a child's Mutex.
func endedLogger(proc string, emit func(Event)) *zap.Logger {
	return zap.New(endedCore{proc: proc, emit: emit})
}

func (c endedCore) Enabled(l zapcore.Level) bool      { return l >= zapcore.WarnLevel }
func (c endedCore) With([]zapcore.Field) zapcore.Core { return c }
func (c endedCore) Sync() error                       { return nil }

func (c endedCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message != lostMessage {
		return ce
	}
	return ce.AddCore(e, c)
}

func (c endedCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	t := Now()
	ev := Event{T: t, Kind: Ended, Proc: c.proc}
	for _, f := range fields {
		switch f.Key {
		case "lock":
			ev.Lock = f.String
		case "fence":
			ev.Fence = uint64(f.Integer)
		case "cause":
			ev.Detail = f.String
		}
	}
	c.emit(ev)
	return nil
}
