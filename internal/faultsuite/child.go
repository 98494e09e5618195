//go:build linux

package faultsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mutexfx/mutexfx/component"
	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/etcd"
	"github.com/mutexfx/mutexfx/drivers/file"
	"github.com/mutexfx/mutexfx/drivers/mysql"
	"github.com/mutexfx/mutexfx/drivers/postgres"
	"github.com/mutexfx/mutexfx/drivers/redis"
	goredis "github.com/redis/go-redis/v9"
)

// SpecEnv is the environment variable carrying a child's spec (JSON).
const SpecEnv = "MUTEXFX_FAULTS_SPEC"

// spec is what a child is told.
type spec struct {
	Proc     string        `json:"proc"`
	Mode     string        `json:"mode"`
	Target   string        `json:"target"` // address, DSN or directory; etcd: addresses joined by commas
	Master   string        `json:"master,omitempty"`
	Register string        `json:"register"`
	Workers  int           `json:"workers"`
	Locks    []string      `json:"locks"`
	TTL      time.Duration `json:"ttl"`
	Seed     uint64        `json:"seed"`
}

// IsChild reports whether this process was started as a child of a run.
func IsChild() bool { return os.Getenv(SpecEnv) != "" }

// RunChild plays a child: its workers contend until its standard input
// closes, writing events as JSON lines to standard output. It returns the
// process's exit code.
func RunChild() int {
	var s spec
	if err := json.Unmarshal([]byte(os.Getenv(SpecEnv)), &s); err != nil {
		fmt.Fprintf(os.Stderr, "faultsuite child: bad %s: %v\n", SpecEnv, err)
		return 2
	}
	if err := runChild(s, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "faultsuite child %s: %v\n", s.Proc, err)
		return 1
	}
	return 0
}

func runChild(s spec, in io.Reader, out io.Writer) error {
	goredis.SetLogger(quiet{}) // its pool's dial errors are expected here: the faults cause them
	d, err := newDriver(s.Mode, s.Target, s.Master)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	enc := json.NewEncoder(out)
	emit := func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(e) // unbuffered: in the pipe even if we are killed next
	}
	m, err := component.New(component.Options{Driver: d, Prefix: "faults:", TTL: s.TTL, Logger: endedLogger(s.Proc, emit)})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // ends when the parent closes our stdin (or dies)
		_, _ = io.Copy(io.Discard, in)
		cancel()
	}()
	errs := make(chan error, s.Workers)
	for i := range s.Workers {
		rc, err := dialRegister(s.Register)
		if err != nil {
			return err
		}
		k := &worker{proc: s.Proc, id: i, locks: s.Locks, ttl: s.TTL, m: m, w: rc, emit: emit,
			rng: rand.New(rand.NewPCG(s.Seed, uint64(i)))}
		go func() {
			defer rc.Close()
			errs <- k.run(ctx)
		}()
	}
	var first error
	for range s.Workers {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 2*s.TTL+time.Second)
	defer ccancel()
	_ = m.Close(cctx)
	return first
}

// newDriver builds the driver of a mode on target.
func newDriver(mode, target, master string) (drivers.Driver, error) {
	switch mode {
	case "file":
		return file.New(file.Options{Dir: target})
	case "redis":
		return redis.New(redis.Options{Addrs: []string{target}})
	case "sentinel":
		return redis.New(redis.Options{Addrs: []string{target}, MasterName: master})
	case "cluster":
		return redis.New(redis.Options{Addrs: strings.Split(target, ","), Cluster: true})
	case "postgres-advisory":
		return postgres.New(postgres.Options{URL: target, Mode: postgres.ModeAdvisory})
	case "postgres-table":
		return postgres.New(postgres.Options{URL: target, Mode: postgres.ModeTable})
	case "mysql-advisory":
		return mysql.New(mysql.Options{DSN: target, Mode: mysql.ModeAdvisory})
	case "mysql-table":
		return mysql.New(mysql.Options{DSN: target, Mode: mysql.ModeTable})
	case "etcd":
		return etcd.New(etcd.Options{Endpoints: strings.Split(target, ",")}, nil)
	}
	return nil, fmt.Errorf("faultsuite: no driver for mode %q", mode)
}

// quiet is go-redis's logger in a child: nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
