package schedule_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/file"
	"github.com/mutexfx/mutexfx/internal/testutil"
	"github.com/mutexfx/mutexfx/schedule"
)

// Environment of the "scheduler" child role.
const (
	envDir    = "SCHED_DIR"    // the file driver's directory
	envOut    = "SCHED_OUT"    // the child's report file
	envOffset = "SCHED_OFFSET" // its clock offset, a Go duration
)

// runChild plays a child role and returns the exit code.
func runChild(role string) int {
	var run func() error
	switch role {
	case "scheduler":
		run = childScheduler
	case "killable":
		run = childKillable
	default:
		fmt.Fprintf(os.Stderr, "unknown child role %q\n", role)
		return 2
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// childScheduler runs an exclusive job every period on the file driver for
// until its standard input ends (the parent closes it), writing "start <ns>", "run <planned ns>" and
// "stop <ns>" lines to its report file.
func childScheduler() error {
	offset, err := time.ParseDuration(os.Getenv(envOffset))
	if err != nil {
		return err
	}
	out, err := os.Create(os.Getenv(envOut))
	if err != nil {
		return err
	}
	defer out.Close()
	var mu sync.Mutex
	report := func(kind string, t time.Time, detail ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(out, append([]any{kind, t.UnixNano()}, detail...)...)
	}
	drv, err := file.New(file.Options{Dir: os.Getenv(envDir)})
	if err != nil {
		return err
	}
	m, err := component.New(component.Options{Driver: drv, TTL: 2 * time.Second})
	if err != nil {
		return err
	}
	defer m.Close(context.Background())
	core, logged := observer.New(zapcore.DebugLevel)
	s, err := schedule.New(schedule.Options{Mutex: m, Clock: schedule.OffsetClock(offset), Logger: zap.New(core)},
		schedule.Job{Name: "report", Every: period, Exclusive: true, Run: func(ctx context.Context) error {
			p, _ := schedule.Planned(ctx)
			// what a double run would be diagnosed with: the fence and
			// when (real time) this instance held the lock
			var fence uint64
			if l := component.LockFrom(ctx); l != nil {
				fence = l.Fence()
			}
			report("run", p, fence, time.Now().UnixNano())
			return nil
		}})
	if err != nil {
		return err
	}
	if err := s.Start(context.Background()); err != nil {
		return err
	}
	report("start", time.Now())
	// the scenario's length: until the parent has seen enough instants run
	// and closes stdin (or dies)
	_, _ = io.Copy(io.Discard, os.Stdin)
	report("stop", time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = s.Stop(ctx)
	// what the scheduler said of each instant, for the parent's diagnosis
	// of an instant nobody ran: "log <planned ns> <cause> <message>", the
	// cause's spaces as "_", "-" for none
	for _, e := range logged.All() {
		fields := e.ContextMap()
		if p, ok := fields["planned"].(time.Time); ok {
			cause, _ := fields["cause"].(string)
			report("log", p, strings.ReplaceAll(cmp.Or(cause, "-"), " ", "_"), e.Message)
		}
	}
	return err
}

func TestExclusiveThreeProcessesFileDriver(t *testing.T) {
	t.Parallel()
	for _, skewed := range []bool{false, true} {
		t.Run(fmt.Sprintf("skewed=%v", skewed), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var cmds []*exec
			for i := range 3 {
				offset := time.Duration(0)
				if skewed {
					offset = skews[i]
				}
				out := filepath.Join(dir, fmt.Sprintf("child%d.out", i))
				cmd := testutil.Child(t, "scheduler",
					envDir+"="+filepath.Join(dir, "locks"), envOut+"="+out,
					envOffset+"="+offset.String())
				stdin, err := cmd.StdinPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds = append(cmds, &exec{wait: cmd.Wait, out: out, name: fmt.Sprint("process", i), stdin: stdin})
			}
			testutil.Poll(t, 30*period, "twelve instants run by the processes", func() bool {
				ran := map[string]bool{}
				for _, c := range cmds {
					b, _ := os.ReadFile(c.out) // written line by line by another process: polled
					for line := range strings.Lines(string(b)) {
						if f := strings.Fields(line); len(f) >= 2 && f[0] == "run" {
							ran[f[1]] = true
						}
					}
				}
				return len(ran) >= 12
			})
			for _, c := range cmds {
				_ = c.stdin.Close()
			}
			by := map[time.Time][]string{}
			said := map[time.Time]map[string][]string{} // instant → cause → processes
			var from, to time.Time
			for _, c := range cmds {
				if err := c.wait(); err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				start, stop := c.read(t, by, said)
				if start.After(from) {
					from = start
				}
				if to.IsZero() || stop.Before(to) {
					to = stop
				}
			}
			// An instant every process woke up for too late (a loaded
			// machine starving all three) goes unrun by design: none can
			// be sure another did not run it. Any other gap fails.
			excused := 0
			for p, who := range said {
				if _, ran := by[p]; !ran && len(who["late"]) == len(cmds) {
					t.Logf("instant %s unrun: every process woke too late: %v", p.Format("15:04:05.000"), who)
					by[p] = []string{"nobody (all late)"}
					excused++
				}
			}
			if excused > 1 {
				t.Errorf("%d instants excused as all late; at most one is: a machine this starved tests nothing", excused)
			}
			checkExactlyOnce(t, by, period, from.Add(period), to.Add(-period))
			for p, who := range said {
				if by[p] == nil && !p.Before(from.Add(period)) && !p.After(to.Add(-period)) {
					t.Logf("instant %s: %v", p.Format("15:04:05.000"), who)
				}
			}
		})
	}
}

// exec is a child process and its report.
type exec struct {
	name  string
	out   string
	wait  func() error
	stdin io.Closer // closing it ends the scenario
}

// read adds the child's runs to by, and what its scheduler logged of each
// instant to said, and returns when it started and stopped
// its scheduler.
func (c *exec) read(t *testing.T, by map[time.Time][]string, said map[time.Time]map[string][]string) (start, stop time.Time) {
	t.Helper()
	f, err := os.Open(c.out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			t.Fatalf("%s: bad line %q", c.name, sc.Text())
		}
		kind := fields[0]
		n, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			t.Fatalf("%s: bad line %q", c.name, sc.Text())
		}
		at := time.Unix(0, n).UTC()
		switch kind {
		case "start":
			start = at
		case "stop":
			stop = at
		case "run":
			who := c.name
			if len(fields) == 4 { // fence, real time: shown if it ran twice
				ran, _ := strconv.ParseInt(fields[3], 10, 64)
				who = fmt.Sprintf("%s (fence %s, held at %s)", c.name, fields[2], time.Unix(0, ran).UTC().Format("15:04:05.000"))
			}
			by[at] = append(by[at], who)
		case "log":
			if len(fields) < 3 {
				t.Fatalf("%s: bad line %q", c.name, sc.Text())
			}
			cause := fields[2]
			if said[at] == nil {
				said[at] = map[string][]string{}
			}
			// one entry per process and cause
			if !slices.Contains(said[at][cause], c.name) {
				said[at][cause] = append(said[at][cause], c.name)
			}
		}
	}
	if start.IsZero() || stop.IsZero() {
		t.Fatalf("%s: incomplete report", c.name)
	}
	return start, stop
}
