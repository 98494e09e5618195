//go:build linux

package faultsuite

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers/memory"
	"github.com/mutexfx/mutexfx/internal/testutil"
)

// NewChild returns a command that, started with the extra environment
// ("K=V"), runs RunChild: the test binary or the command re-executed.
type NewChild func(env []string) *exec.Cmd

// Result is one run's outcome.
type Result struct {
	Report Report
	// History is every event, in the order received.
	History []Event
	// ChildErrors are children that exited on their own with an error.
	ChildErrors []string
}

// history collects events from every goroutine.
type history struct {
	mu     sync.Mutex
	events []Event
}

func (h *history) emit(e Event) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
}

func (h *history) all() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.events...)
}

// Run runs cfg: it starts the mode's throwaway store, the register, a
// proxy and a child per process, injects faults at random until
// cfg.Duration has passed, stops the children and checks the history.
// The fault loop runs on the calling goroutine (tb's Fatal may be called
// there, as a test's must). logf gets a line per fault.
func Run(tb testing.TB, cfg Config, newChild NewChild, logf func(string, ...any)) (Result, error) {
	tb.Helper()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	logf("faultsuite: store %s, %d procs × %d workers × %d locks, ttl %v, %v, faults %v, seed %d",
		cfg.Store, cfg.Procs, cfg.Workers, cfg.Locks, cfg.TTL, cfg.Duration, cfg.Faults, cfg.Seed)
	h := &history{}
	reg, err := NewRegister(tb.TempDir(), h.emit)
	if err != nil {
		return Result{}, err
	}
	defer reg.Close()
	locks := make([]string, cfg.Locks)
	for i := range locks {
		locks[i] = fmt.Sprintf("lock%d", i)
	}
	if cfg.Store == "memory" {
		runMemory(cfg, locks, reg, h.emit)
		return Result{Report: Check(h.all()), History: h.all()}, nil
	}
	st := setupStore(tb, cfg.Store)
	st.keys = locks
	r := &run{cfg: cfg, st: st, locks: locks, reg: reg, h: h, newChild: newChild, logf: logf,
		rng: rand.New(rand.NewPCG(cfg.Seed, 1)), failovers: map[string]int{}}
	for i := range cfg.Procs {
		p := &proc{slot: i}
		for _, up := range st.upstreams {
			p.proxies = append(p.proxies, testutil.NewProxy(tb, up))
		}
		if err := r.start(p); err != nil {
			r.stopAll()
			return Result{}, err
		}
		r.procs = append(r.procs, p)
	}
	err = r.faults(tb)
	r.stopAll()
	return Result{Report: Check(h.all()), History: h.all(), ChildErrors: r.childErrors()}, err
}

// run is one run's state.
type run struct {
	cfg      Config
	st       *store
	locks    []string
	reg      *Register
	h        *history
	newChild NewChild
	logf     func(string, ...any)
	rng      *rand.Rand
	procs    []*proc
	order    []string // faults left in this round
	// failovers counts the fail-overs done, by kind.
	failovers map[string]int

	mu   sync.Mutex
	errs []string
}

// proc is one process slot: its proxies (one per store member) and
// current child.
type proc struct {
	slot    int
	inc     int
	name    string
	proxies []*testutil.Proxy
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	done    chan struct{} // closed when the child's output is read and it has exited
}

// start starts a new child in p's slot.
func (r *run) start(p *proc) error {
	p.name = fmt.Sprintf("p%d.%d", p.slot, p.inc)
	p.inc++
	addrs := make([]string, len(p.proxies))
	for i, x := range p.proxies {
		addrs[i] = x.Addr
	}
	s := spec{Proc: p.name, Mode: r.cfg.Store, Target: r.st.target(addrs), Master: r.st.master,
		Register: r.reg.Path(), Workers: r.cfg.Workers, Locks: r.locks, TTL: r.cfg.TTL,
		Seed: r.rng.Uint64()}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	cmd := r.newChild([]string{SpecEnv + "=" + string(b)})
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("faultsuite: start child: %w", err)
	}
	p.cmd, p.stdin, p.done = cmd, stdin, make(chan struct{})
	name, done := p.name, p.done
	go func() { // owned by the slot: ends when the child exits
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e Event
			if err := json.Unmarshal(sc.Bytes(), &e); err == nil {
				r.h.emit(e)
			}
		}
		if err := cmd.Wait(); err != nil && !killed(cmd) {
			r.mu.Lock()
			r.errs = append(r.errs, fmt.Sprintf("%s: %v", name, err))
			r.mu.Unlock()
		}
	}()
	return nil
}

// killed reports whether the child died of our SIGKILL.
func killed(cmd *exec.Cmd) bool {
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func (r *run) childErrors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// stopAll closes every child's stdin (it releases its locks and exits)
// and kills those still running after 2 ttl + 10 s.
func (r *run) stopAll() {
	for _, p := range r.procs {
		p.stdin.Close()
	}
	limit := time.NewTimer(2*r.cfg.TTL + 10*time.Second)
	defer limit.Stop()
	for _, p := range r.procs {
		select {
		case <-p.done:
		case <-limit.C:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// faults injects faults one at a time, every ½–1½ ttl, each fault once
// per round in random order, on a random process, until
// the run's duration has passed.
func (r *run) faults(tb testing.TB) error {
	end := time.Now().Add(r.cfg.Duration)
	for {
		wait := r.cfg.TTL/2 + time.Duration(r.rng.Int64N(int64(r.cfg.TTL)))
		if left := time.Until(end); left < wait {
			time.Sleep(left) // the holders run meanwhile: nothing to wait for but the clock
			return nil
		}
		time.Sleep(wait)
		if len(r.cfg.Faults) == 0 {
			continue
		}
		if len(r.order) == 0 { // every fault once per round, in random order
			r.order = slices.Clone(r.cfg.Faults)
			r.rng.Shuffle(len(r.order), func(i, j int) { r.order[i], r.order[j] = r.order[j], r.order[i] })
		}
		f := r.order[0]
		r.order = r.order[1:]
		p := r.target()
		if err := r.inject(tb, f, p); err != nil {
			return err
		}
	}
}

// inject applies one fault to p (or to the store).
func (r *run) inject(tb testing.TB, f string, p *proc) error {
	long := func() time.Duration {
		return r.cfg.TTL*3/2 + time.Duration(r.rng.Int64N(int64(r.cfg.TTL)))
	}
	// note stamps a fault before it is applied: its effect cannot come
	// earlier (a SIGKILL is stamped after the signal, see Killed).
	note := func(detail, target string) {
		r.h.emit(Event{T: Now(), Kind: Fault, Detail: detail, Proc: target})
		r.logf("fault: %s %s", detail, target)
	}
	switch f {
	case FaultKill:
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		r.h.emit(Event{T: Now(), Kind: Killed, Proc: p.name})
		r.logf("fault: kill %s", p.name)
		<-p.done
		return r.start(p)
	case FaultPause:
		d := long()
		_ = p.cmd.Process.Signal(syscall.SIGSTOP)
		r.h.emit(Event{T: Now(), Kind: Stopped, Proc: p.name})
		r.logf("fault: pause %s for %v", p.name, d.Round(time.Millisecond))
		time.Sleep(d) // the pause's length is the fault
		r.h.emit(Event{T: Now(), Kind: Continued, Proc: p.name})
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
	case FaultStall:
		d := long()
		note(FaultStall, p.name)
		for _, x := range p.proxies {
			x.Stall()
		}
		time.Sleep(d) // the stall's length is the fault
		for _, x := range p.proxies {
			x.Resume()
		}
	case FaultReset:
		note(FaultReset, p.name)
		for _, x := range p.proxies {
			x.Reset()
		}
	case FaultRestart:
		note(FaultRestart, "")
		r.st.restart()
	case FaultFailover, FaultLagFailover:
		// Fail-overs come FailoverGap apart, so most are skipped: the
		// kind done fewer times goes first, so that a run long enough
		// for two has one of each.
		if other := otherFailover(f); slices.Contains(r.cfg.Faults, other) && r.failovers[other] < r.failovers[f] {
			f = other
		}
		lag := time.Duration(0)
		if f == FaultLagFailover {
			lag = r.cfg.TTL / 2
		}
		if r.st.failover(tb, lag) {
			r.failovers[f]++
			note(f, "")
		}
	case FaultLeaderKill:
		note(FaultLeaderKill, "")
		if err := r.st.leaderKill(r.cfg.TTL); err != nil {
			r.logf("fault: leaderkill: %v", err)
		}
	case FaultMemberPause:
		d := long()
		note(FaultMemberPause, "")
		r.st.memberPause(r.rng.IntN(len(r.st.upstreams)), d)
	case FaultBackend:
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		note(FaultBackend, "")
		if err := r.st.backend(ctx); err != nil {
			r.logf("fault: backend: %v", err)
		}
	}
	return nil
}

// runMemory runs memory mode: each "process" is a Mutex on one shared
// memory driver, its workers goroutines; no fault applies.
func runMemory(cfg Config, locks []string, reg *Register, emit func(Event)) {
	d := memory.New()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	var ms []*component.Mutex
	for p := range cfg.Procs {
		m, err := component.New(component.Options{Driver: d, Prefix: "faults:", TTL: cfg.TTL})
		if err != nil {
			panic(err) // the options are constants
		}
		ms = append(ms, m)
		for i := range cfg.Workers {
			k := &worker{proc: fmt.Sprintf("p%d.0", p), id: i, locks: locks, ttl: cfg.TTL, m: m, w: reg, emit: emit,
				rng: rand.New(rand.NewPCG(cfg.Seed, uint64(p*1000+i)))}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = k.run(ctx)
			}()
		}
	}
	wg.Wait()
	for _, m := range ms {
		_ = m.Close(context.Background())
	}
	_ = d.Close(context.Background())
}

// target picks the process to fault: at random among those holding a lock
// now, else among all.
func (r *run) target() *proc {
	open := map[string]int{}
	for _, e := range r.h.all() {
		switch e.Kind {
		case Acquired:
			open[e.Proc]++
		case Lost, Releasing:
			open[e.Proc]--
		}
	}
	var holding []*proc
	for _, p := range r.procs {
		if open[p.name] > 0 {
			holding = append(holding, p)
		}
	}
	if len(holding) == 0 {
		return r.procs[r.rng.IntN(len(r.procs))]
	}
	return holding[r.rng.IntN(len(holding))]
}

// otherFailover returns the other kind of fail-over than f.
func otherFailover(f string) string {
	if f == FaultFailover {
		return FaultLagFailover
	}
	return FaultFailover
}
