//go:build linux

package file_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/file"
)

// Child roles and their environment.
const (
	roleHold    = "file-hold"    // take KEY, print "held <fence>", release at stdin EOF, print "released <ok>"
	roleContend = "file-contend" // ROUNDS times: take KEY through a Mutex, append "B"/"E" lines to OUT, release

	envDir    = "MUTEXFX_FILE_DIR"
	envKey    = "MUTEXFX_FILE_KEY"
	envTTL    = "MUTEXFX_FILE_TTL"
	envOut    = "MUTEXFX_FILE_OUT"
	envRounds = "MUTEXFX_FILE_ROUNDS"
)

// runChild plays a child role of the process tests and returns the exit code.
func runChild(role string) int {
	var err error
	switch role {
	case roleHold:
		err = childHold()
	case roleContend:
		err = childContend()
	default:
		err = fmt.Errorf("unknown child role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "child %s (pid %d): %v\n", role, os.Getpid(), err)
		return 1
	}
	return 0
}

func childDriver() (*file.Driver, error) {
	return file.New(file.Options{Dir: os.Getenv(envDir)})
}

func childHold() error {
	ttl, err := time.ParseDuration(os.Getenv(envTTL))
	if err != nil {
		return err
	}
	d, err := childDriver()
	if err != nil {
		return err
	}
	ctx := context.Background()
	defer func() { _ = d.Close(ctx) }()
	key, token := os.Getenv(envKey), "child-"+strconv.Itoa(os.Getpid())
	res, err := d.Acquire(ctx, drivers.AcquireRequest{Key: key, Token: token, TTL: ttl})
	if err != nil {
		return err
	}
	if !res.Acquired {
		return fmt.Errorf("lock %q is held", key)
	}
	fmt.Printf("held %d\n", res.Fence)
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		return err
	}
	ok, err := d.Release(ctx, key, token)
	if err != nil {
		return err
	}
	fmt.Printf("released %v\n", ok)
	return nil
}

func childContend() error {
	rounds, err := strconv.Atoi(os.Getenv(envRounds))
	if err != nil {
		return err
	}
	d, err := childDriver()
	if err != nil {
		return err
	}
	m, err := component.New(component.Options{Driver: d, Prefix: "contend:", TTL: 10 * time.Second, RetryDelay: time.Millisecond})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	defer func() { _ = m.Close(ctx) }()
	out, err := os.OpenFile(os.Getenv(envOut), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer out.Close()
	w := bufio.NewWriter(out)
	for range rounds {
		l, err := m.Acquire(ctx, os.Getenv(envKey), component.WithTimeout(time.Minute))
		if err != nil {
			return err
		}
		// Two separate appends with a yield in between: another process
		// writing inside this window would show as interleaved lines.
		for _, tag := range []string{"B", "E"} {
			fmt.Fprintf(w, "%s %d %d\n", tag, os.Getpid(), l.Fence())
			if err := w.Flush(); err != nil {
				return err
			}
			runtime.Gosched()
		}
		if _, err := l.Release(ctx); err != nil {
			return err
		}
	}
	return nil
}
