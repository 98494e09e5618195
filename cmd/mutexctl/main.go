//go:build unix

// Command mutexctl looks at and acts on the locks of a mutexfx store from a
// shell: list the held locks and their holders, inspect one, break a stuck
// one, and run a command holding a lock (flock(1) for a cluster). It reads
// the configuration file the application uses. See docs/mutexctl.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	goredis "github.com/redis/go-redis/v9"
)

// Exit codes of mutexctl; `run` otherwise exits with its command's code.
const (
	// ExitError: a store or configuration error, or a refused release.
	ExitError = 1
	// ExitUsage: bad arguments or flags.
	ExitUsage = 64
	// ExitTimeout: `run` could not have the lock within --timeout.
	ExitTimeout = 75
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// go-redis prints its pool's failed dials to stderr; the command
	// reports the store's error itself, once.
	goredis.SetLogger(quietRedis{})
	os.Exit(Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// quietRedis drops go-redis's log lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return "exit status " + strconv.Itoa(e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// Main runs mutexctl with args and returns its exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "mutexctl:", ee.err)
		}
		return ee.code
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, "mutexctl:", err)
		return ExitUsage
	}
	fmt.Fprintln(stderr, "mutexctl:", err)
	return ExitError
}
