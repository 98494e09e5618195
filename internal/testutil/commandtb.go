package testutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

// CommandTB lets a command (not a test) use this package's throwaway
// servers and proxies, which take a testing.TB: Fatal and FailNow end the
// function given to Run with an error instead of ending a test; Cleanup
// functions run when Run returns; TempDir makes directories removed then.
// Only the methods listed here work (the embedded nil TB provides the
// rest, which panic); it is used from one goroutine, like a test's t.
type CommandTB struct {
	testing.TB // nil: satisfies the interface's private method

	name string

	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

// NewCommandTB returns a CommandTB named name (for messages).
func NewCommandTB(name string) *CommandTB { return &CommandTB{name: name} }

// errFatal carries a Fatal's message out of Run.
type errFatal struct{ msg string }

// Run calls f with c, turns a Fatal in f into an error, and runs the
// cleanups (last registered first) before returning.
func (c *CommandTB) Run(f func(testing.TB) error) (err error) {
	defer c.cleanup()
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(errFatal)
			if !ok {
				panic(r)
			}
			err = errors.New(e.msg)
		}
	}()
	return f(c)
}

func (c *CommandTB) cleanup() {
	for {
		c.mu.Lock()
		n := len(c.cleanups)
		if n == 0 {
			c.mu.Unlock()
			return
		}
		f := c.cleanups[n-1]
		c.cleanups = c.cleanups[:n-1]
		c.mu.Unlock()
		f()
	}
}

// Helper does nothing.
func (c *CommandTB) Helper() {}

// Name returns the name given to NewCommandTB.
func (c *CommandTB) Name() string { return c.name }

// Context returns a background context.
func (c *CommandTB) Context() context.Context { return context.Background() }

// Cleanup registers f to run when Run returns.
func (c *CommandTB) Cleanup(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cleanups = append(c.cleanups, f)
}

// TempDir returns a new directory removed when Run returns.
func (c *CommandTB) TempDir() string {
	dir, err := os.MkdirTemp("", "mutexfx-"+c.name+"-")
	if err != nil {
		c.Fatalf("temp dir: %v", err)
	}
	c.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// Log and Logf write to stderr.
func (c *CommandTB) Log(args ...any) { fmt.Fprintln(os.Stderr, args...) }

// Logf writes to stderr.
func (c *CommandTB) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// Error logs and marks the run failed.
func (c *CommandTB) Error(args ...any) { c.Log(args...); c.Fail() }

// Errorf logs and marks the run failed.
func (c *CommandTB) Errorf(format string, args ...any) { c.Logf(format, args...); c.Fail() }

// Fail marks the run failed.
func (c *CommandTB) Fail() { c.mu.Lock(); c.failed = true; c.mu.Unlock() }

// Failed reports whether Fail was called.
func (c *CommandTB) Failed() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.failed }

// FailNow ends Run with an error.
func (c *CommandTB) FailNow() { c.Fail(); panic(errFatal{c.name + ": failed"}) }

// Fatal ends Run with an error of args.
func (c *CommandTB) Fatal(args ...any) { c.Fail(); panic(errFatal{fmt.Sprint(args...)}) }

// Fatalf ends Run with an error of the formatted message.
func (c *CommandTB) Fatalf(format string, args ...any) {
	c.Fail()
	panic(errFatal{fmt.Sprintf(format, args...)})
}
