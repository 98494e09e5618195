//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mutexfx/mutexfx"
	"github.com/mutexfx/mutexfx/component"
)

// forwarded are the signals run passes on to its command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

type runFlags struct {
	timeout time.Duration
	ttl     time.Duration
	grace   time.Duration
}

func newRun(g *globals) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run NAME [flags] -- CMD [ARGS...]",
		Short: "Run a command while holding the lock NAME (flock(1) for a cluster)",
		Long: "Waits for the lock NAME, runs CMD holding it (renewed every ttl/3), releases it when CMD\n" +
			"exits and exits with CMD's exit code (128+N when CMD was killed by signal N). Exits\n" +
			"with 75 when the lock could not be had within --timeout. If the lock is lost, CMD gets\n" +
			"SIGTERM, then SIGKILL after --grace. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and\n" +
			"SIGUSR2 are forwarded to CMD's process group. CMD sees MUTEXFX_LOCK (the name) and\n" +
			"MUTEXFX_FENCE (the lock's fencing token) in its environment.",
		Args: args(func(cmd *cobra.Command, a []string) error {
			if len(a) < 2 || cmd.ArgsLenAtDash() != 1 {
				return errors.New("want NAME -- CMD [ARGS...]")
			}
			return nil
		}),
		RunE: func(cmd *cobra.Command, a []string) error {
			if f.grace < 0 {
				return usageError{fmt.Errorf("--grace must not be negative, got %v", f.grace)}
			}
			return g.withStore(cmd.Context(), func(m *mutexfx.Mutex) error {
				return runLocked(cmd, g, m, a[0], a[1:], f)
			})
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.timeout, "timeout", component.Forever, "how long to wait for the lock (negative: forever; 0: one attempt)")
	fl.DurationVar(&f.ttl, "ttl", 0, "the lock's ttl (default: the store's)")
	fl.DurationVar(&f.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL when the lock is lost")
	return cmd
}

func runLocked(cmd *cobra.Command, g *globals, m *mutexfx.Mutex, name string, argv []string, f runFlags) error {
	ctx, stderr := cmd.Context(), cmd.ErrOrStderr()
	if f.timeout == 0 {
		// the flag always has a value (by default Forever): 0 is one
		// attempt, as flock -w 0; WithTimeout(0) would be refused
		f.timeout = component.NoWait
	}
	opts := []component.AcquireOption{component.WithTimeout(f.timeout)}
	if f.ttl != 0 {
		opts = append(opts, component.WithTTL(f.ttl))
	}
	l, err := acquire(ctx, m, name, opts, stderr)
	// 75 only when the store answered that the lock is held: a timeout
	// after a store failure is a store error, which `|| [ $? -eq 75 ]`
	// must not take for another holder's run.
	if errors.Is(err, component.ErrTimeout) && !errors.Is(err, component.ErrDriver) {
		return &exitError{code: ExitTimeout, err: err}
	}
	var oe *component.OptionError
	if errors.As(err, &oe) { // the --ttl or --timeout given
		return usageError{fmt.Errorf("--%s: %s", strings.ToLower(oe.Field), oe.Msg)}
	}
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = l.Release(rctx)
	}()

	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = g.stdin, cmd.OutOrStdout(), stderr
	c.Env = append(os.Environ(), "MUTEXFX_LOCK="+name, "MUTEXFX_FENCE="+strconv.FormatUint(l.Fence(), 10))
	// Its own process group: signals reach it once, through mutexctl, and
	// SIGKILL ends its children too.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	if err := c.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()

	group := -c.Process.Pid
	lost := l.Done()
	var kill <-chan time.Time
	for {
		select {
		case s := <-sigs:
			_ = syscall.Kill(group, s.(syscall.Signal))
		case <-lost:
			lost = nil
			fmt.Fprintf(stderr, "mutexctl: lock %q lost (%v): sending SIGTERM to the command\n", name, l.Err())
			_ = syscall.Kill(group, syscall.SIGTERM)
			t := time.NewTimer(f.grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			fmt.Fprintf(stderr, "mutexctl: command still running %v after SIGTERM: sending SIGKILL\n", f.grace)
			_ = syscall.Kill(group, syscall.SIGKILL)
		case err := <-done:
			err = exitOf(c, err)
			if err == nil && lost == nil {
				// CMD did not run alone to its end: never a success.
				err = &exitError{code: ExitError, err: fmt.Errorf("lock %q was lost while the command ran (it exited 0)", name)}
			}
			return err
		}
	}
}

// acquire takes the lock, telling a terminal user that it waits.
func acquire(ctx context.Context, m *mutexfx.Mutex, name string, opts []component.AcquireOption, stderr io.Writer) (*mutexfx.Lock, error) {
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		// A first try tells who holds it; a store error there is not the
		// end: the wait below retries it until --timeout, as off a terminal.
		l, err := m.TryAcquire(ctx, name, opts...)
		if err == nil {
			return l, nil
		}
		if errors.Is(err, mutexfx.ErrLocked) {
			who := "another holder"
			if st, held, err := m.Inspect(ctx, name); err == nil && held {
				who = view(st, time.Now()).holder()
			}
			fmt.Fprintf(stderr, "mutexctl: waiting for lock %q held by %s\n", name, who)
		}
	}
	return m.Acquire(ctx, name, opts...)
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// exitOf turns the command's end into mutexctl's exit.
func exitOf(c *exec.Cmd, err error) error {
	st := c.ProcessState
	if st == nil {
		return err
	}
	code := st.ExitCode()
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	if code == 0 {
		return nil
	}
	return &exitError{code: code}
}
