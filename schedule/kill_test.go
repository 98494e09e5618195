package schedule_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"math/rand/v2"
	"os"
	osexec "os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/mysql"
	"github.com/mutexfx/mutexfx/drivers/postgres"
	"github.com/mutexfx/mutexfx/drivers/redis"
	"github.com/mutexfx/mutexfx/internal/testutil"
	"github.com/mutexfx/mutexfx/schedule"
)

// The killed-runner scenario: a 3 s job every 5 s on a store with the
// default ttl (30 s).
const (
	killPeriod = 5 * time.Second
	killRun    = 3 * time.Second
	envStore   = "SCHED_STORE"  // the store kind (see killMutex)
	envPrefix  = "SCHED_PREFIX" // the lock prefix
	envRerun   = "SCHED_RERUN"  // Job.RerunInterrupted, "true" or "false"
)

// killStores are the stores of the killed-runner test.
var killStores = []string{"redis", "postgres-advisory", "postgres-table", "mysql-advisory", "mysql-table"}

// killMutex returns a Mutex with the default ttl on the store kind, its
// locks under prefix.
func killMutex(kind, prefix string) (*component.Mutex, error) {
	var drv drivers.Driver
	var err error
	switch kind {
	case "redis":
		drv, err = redis.New(redis.Options{Addrs: []string{testutil.RedisAddr()}})
	case "postgres-advisory", "postgres-table":
		drv, err = postgres.New(postgres.Options{URL: testutil.PostgresDSN(), Mode: strings.TrimPrefix(kind, "postgres-")})
	case "mysql-advisory", "mysql-table":
		drv, err = mysql.New(mysql.Options{DSN: testutil.MySQLDSN(), Mode: strings.TrimPrefix(kind, "mysql-")})
	default:
		err = fmt.Errorf("unknown store %q", kind)
	}
	if err != nil {
		return nil, err
	}
	return component.New(component.Options{Driver: drv, Prefix: prefix})
}

// killJob is the scenario's job: it calls begin with its planned instant,
// then works killRun or until its ctx ends.
func killJob(rerun bool, begin func(planned time.Time)) schedule.Job {
	return schedule.Job{Name: "kill", Every: killPeriod, Exclusive: true, RerunInterrupted: rerun, Run: func(ctx context.Context) error {
		p, _ := schedule.Planned(ctx)
		begin(p)
		t := time.NewTimer(killRun)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return nil
	}}
}

// childKillable runs killJob on the store SCHED_STORE, its clock offset by
// SCHED_OFFSET, writing "begin <planned ns>" to SCHED_OUT as each run
// begins, until it is killed.
func childKillable() error {
	offset, err := time.ParseDuration(os.Getenv(envOffset))
	if err != nil {
		return err
	}
	out, err := os.Create(os.Getenv(envOut))
	if err != nil {
		return err
	}
	defer out.Close()
	m, err := killMutex(os.Getenv(envStore), os.Getenv(envPrefix))
	if err != nil {
		return err
	}
	defer m.Close(context.Background())
	rerun, err := strconv.ParseBool(os.Getenv(envRerun))
	if err != nil {
		return err
	}
	logFile, err := os.Create(os.Getenv(envOut) + ".log")
	if err != nil {
		return err
	}
	defer logFile.Close()
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.AddSync(logFile), zapcore.DebugLevel))
	var mu sync.Mutex
	s, err := schedule.New(schedule.Options{Mutex: m, Clock: schedule.OffsetClock(offset), Logger: log},
		killJob(rerun, func(p time.Time) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintln(out, "begin", p.UnixNano())
		}))
	if err != nil {
		return err
	}
	if err := firstContact(m); err != nil {
		return err
	}
	if err := s.Start(context.Background()); err != nil {
		return err
	}
	mu.Lock()
	fmt.Fprintln(out, "ready")
	mu.Unlock()
	// The parent kills this process (SIGKILL); SIGTERM or a minute (the
	// parent gone) stop it.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	<-ctx.Done()
	return s.Stop(context.Background())
}

// firstContact makes m's first call to its store (its connection, the
// lock table made if missing), so that the instants its scheduler tries
// do not pay for it: under load that can take longer than the attempt's
// second, and the instant is then not tried.
func firstContact(m *component.Mutex) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := m.Inspect(ctx, "first-contact")
	return err
}

// ready reports whether a killable child's scheduler has started.
func ready(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return slices.Contains(strings.Split(string(b), "\n"), "ready")
}

// childLogged reports whether a killable child logged, at level, msg
// about the instant planned.
func childLogged(t *testing.T, path, level, msg string, planned time.Time) bool {
	t.Helper()
	b, err := os.ReadFile(path + ".log")
	if os.IsNotExist(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		var e struct {
			Level, Msg string
			Planned    time.Time
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Level == level && e.Msg == msg && e.Planned.Equal(planned) {
			return true
		}
	}
	return false
}

// begins reads the instants whose runs a killable child began.
func begins(t *testing.T, path string) []time.Time {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []time.Time
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		kind, ns, _ := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(ns, 10, 64)
		if kind != "begin" || err != nil {
			continue // a line being written
		}
		out = append(out, time.Unix(0, n).UTC())
	}
	return out
}

// TestKilledRunnerLosesOnlyItsInstant: of three processes running a 3 s
// exclusive job every 5 s on a store with the default ttl (30 s), the one
// running an instant is killed (SIGKILL) a moment into its run, once the
// others skipped the instant. The next
// two instants run once each (the job's 1.25 s ttl frees the lock before
// the next instant), the killed instant is not run again (at most once),
// and the in-process instance, which skipped it, logs it at warn level as
// interrupted. With Job.RerunInterrupted the killed instant runs once more,
// in one of the other two processes, and the next two still run once.
func TestKilledRunnerLosesOnlyItsInstant(t *testing.T) {
	t.Parallel()
	type scenario struct {
		store string
		rerun bool
	}
	var scenarios []scenario
	for _, kind := range killStores {
		scenarios = append(scenarios, scenario{store: kind})
	}
	scenarios = append(scenarios, scenario{store: "redis", rerun: true}, scenario{store: "postgres-advisory", rerun: true})
	for _, sc := range scenarios {
		kind := sc.store
		t.Run(fmt.Sprintf("%s/rerun=%v", kind, sc.rerun), func(t *testing.T) {
			t.Parallel()
			prefix := fmt.Sprintf("kill%x:", rand.Uint64())
			dir := t.TempDir()
			// The children's clocks are ahead: they get the instants.
			var cmds []*osexec.Cmd
			var outs []string
			for i, offset := range []time.Duration{200 * time.Millisecond, 100 * time.Millisecond} {
				out := filepath.Join(dir, fmt.Sprintf("child%d.out", i))
				cmd := testutil.Child(t, "killable", envStore+"="+kind, envPrefix+"="+prefix,
					envOut+"="+out, envOffset+"="+offset.String(), envRerun+"="+strconv.FormatBool(sc.rerun))
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds, outs = append(cmds, cmd), append(outs, out)
			}
			m, err := killMutex(kind, prefix)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close(context.Background()) })
			log, obs := logs()
			t.Cleanup(func() {
				if !t.Failed() {
					return
				}
				for i, out := range outs {
					b, _ := os.ReadFile(out + ".log")
					t.Logf("child%d:\n%s", i, b)
				}
				for _, e := range obs.All() {
					t.Logf("parent: %s %s %s %v", e.Time.Format("15:04:05.000"), e.Level, e.Message, e.ContextMap())
				}
			})
			if err := firstContact(m); err != nil {
				t.Fatal(err)
			}
			r := newRuns()
			s, err := schedule.New(schedule.Options{Mutex: m, Logger: log},
				killJob(sc.rerun, func(p time.Time) {
					r.mu.Lock()
					defer r.mu.Unlock()
					r.by[p.UTC()] = append(r.by[p.UTC()], "parent")
				}))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer stop(t, s)

			// The instants all three instances try: those after every
			// scheduler started, on every clock (the children's are up to
			// 200 ms ahead). A child slow to start (a loaded host) plans
			// its first instant after the one another child runs.
			testutil.Poll(t, 4*killPeriod, "the children's schedulers to start", func() bool {
				return ready(t, outs[0]) && ready(t, outs[1])
			})
			tried := time.Now().Add(200 * time.Millisecond)
			// Kill the first child to begin such an instant's run, as it
			// begins.
			killed, planned := -1, time.Time{}
			testutil.Poll(t, 4*killPeriod, "a child to begin a run", func() bool {
				for i, out := range outs {
					for _, b := range begins(t, out) {
						if b.After(tried) && (killed < 0 || b.Before(planned)) {
							killed, planned = i, b
						}
					}
				}
				return killed >= 0
			})
			// A moment into the run: once the other two instances tried the
			// instant and skipped it. Killed
			// earlier, a session lock (advisory) is free when the parent
			// tries, and the parent runs the instant.
			const skipped = "exclusive job run by another instance, skipped"
			testutil.Poll(t, killPeriod, "the other instances to skip the instant", func() bool {
				if !childLogged(t, outs[1-killed], "debug", skipped, planned) {
					return false
				}
				for _, e := range obs.FilterMessage(skipped).All() {
					if at, ok := e.ContextMap()["planned"].(time.Time); ok && at.Equal(planned) {
						return true
					}
				}
				return false
			})
			if err := cmds[killed].Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmds[killed].Wait()
			t.Logf("killed child%d running %s", killed, planned.Format("15:04:05.000"))

			all := func() map[time.Time][]string {
				by := r.snapshot()
				for i, out := range outs {
					for _, p := range begins(t, out) {
						by[p] = append(by[p], fmt.Sprint("child", i))
					}
				}
				return by
			}
			last := planned.Add(2 * killPeriod)
			testutil.Poll(t, 4*killPeriod, "the second instant after the kill to begin", func() bool { return len(all()[last]) > 0 })
			by := all()
			switch want := fmt.Sprint("child", killed); {
			case !slices.Contains(by[planned], want):
				t.Errorf("killed instant %s ran by %v, want %s among them", planned.Format("15:04:05.000"), by[planned], want)
			case !sc.rerun && len(by[planned]) != 1:
				t.Errorf("killed instant %s ran by %v, want [%s] only (at most once)", planned.Format("15:04:05.000"), by[planned], want)
			case sc.rerun && len(by[planned]) != 2:
				t.Errorf("killed instant %s ran by %v, want %s and one re-run", planned.Format("15:04:05.000"), by[planned], want)
			}
			for p := planned.Add(killPeriod); !p.After(last); p = p.Add(killPeriod) {
				if len(by[p]) != 1 {
					t.Errorf("instant %s after the kill ran by %v, want one instance", p.Format("15:04:05.000"), by[p])
				}
			}
			// The parent tells it; with RerunInterrupted on a session lock
			// (which Inspect cannot tell from the re-run's) it may be the
			// other child only.
			const interrupted = "exclusive job's instant interrupted on another instance"
			testutil.Poll(t, killPeriod, "the interrupted instant's warning", func() bool {
				for _, e := range obs.FilterMessage(interrupted).All() {
					if at, ok := e.ContextMap()["planned"].(time.Time); ok && at.Equal(planned) && e.Level == zapcore.WarnLevel {
						return true
					}
				}
				return sc.rerun && childLogged(t, outs[1-killed], "warn", interrupted, planned)
			})
		})
	}
}
