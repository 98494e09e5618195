//go:build linux || darwin || dragonfly || freebsd || openbsd || windows

package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mutexfx/mutexfx/drivers"
	"github.com/mutexfx/mutexfx/drivers/internal/kit"
)

// Compile-time check of the capabilities the driver offers.
var _ kit.Capable = (*Driver)(nil)

// Driver keeps locks in a directory of lock files. It is safe for concurrent
// use; instances on the same directory, in one process or in several, exclude
// each other. Each lock it holds keeps one file descriptor open.
type Driver struct {
	opts Options
	pid  uint32
	lk   locker

	dirMu    sync.Mutex
	dirReady bool

	mu     sync.Mutex
	closed bool
	held   map[heldKey]*holder
	busy   map[string]busyEntry // lock file name → key, for keys found held recently
	subs   kit.Listeners
	watch  *watcher
	// retired are dead watchers (their directory went) replaced by watch,
	// whose goroutines may still be delivering their last events: Close
	// and the last unsubscribe wait for them too
	retired []*watcher
	adds    int // acquisitions, to sweep expired holders now and then
}

type heldKey struct{ key, token string }

// holder is a lock this driver holds: the open file description(s) keeping
// its liveness lock.
type holder struct {
	mu     sync.Mutex // serialises operations on fd (a description's locks do not exclude itself)
	fd     handle     // the lock file; noHandle once closed
	live   handle     // the liveness file (MechanismFlock), or noHandle
	fence  uint64
	expiry atomic.Int64 // monotonic ns, as last written to the record
	path   string       // the lock file's path, checked to still name fd (sameFile)
}

// New returns a driver on opts.Dir. It validates opts and touches nothing:
// the directory is created and files are opened on first use.
func New(opts Options) (*Driver, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Driver{
		opts: opts,
		pid:  uint32(os.Getpid()),
		lk:   newLocker(opts),
		held: make(map[heldKey]*holder),
		busy: make(map[string]busyEntry),
	}, nil
}

// Features: expiring locks with fencing, host clock, shared by one host.
func (d *Driver) Features() drivers.Features {
	return drivers.Features{Expiring: true, ServerTime: false, Fencing: true, Scope: "host", MinTTL: 10 * time.Millisecond}
}

// path returns the path of the lock file named name (see fileName).
func (d *Driver) path(name string) string {
	var b strings.Builder
	b.Grow(len(d.opts.Dir) + 1 + maxStem + 70)
	b.WriteString(d.opts.Dir)
	b.WriteByte(filepath.Separator)
	b.WriteString(name)
	return b.String()
}

// ensureDir creates the directory on first use.
func (d *Driver) ensureDir() error {
	d.dirMu.Lock()
	defer d.dirMu.Unlock()
	if d.dirReady {
		return nil
	}
	if err := os.MkdirAll(d.opts.Dir, d.opts.DirMode); err != nil {
		return fmt.Errorf("create lock directory: %w", err)
	}
	d.dirReady = true
	return nil
}

// open opens the lock file named name for reading and writing; with create, it
// creates the file (and the directory) when missing. Without create a
// missing file gives an error satisfying errors.Is(err, fs.ErrNotExist).
func (d *Driver) open(name string, create bool) (handle, error) {
	if create {
		if err := d.ensureDir(); err != nil {
			return noHandle, err
		}
	}
	p := d.path(name)
	fd, err := openFile(p, create, d.opts.FileMode)
	if errors.Is(err, fs.ErrNotExist) && create {
		// The directory was removed under us: create it again once.
		d.dirMu.Lock()
		d.dirReady = false
		d.dirMu.Unlock()
		if err := d.ensureDir(); err != nil {
			return noHandle, err
		}
		fd, err = openFile(p, create, d.opts.FileMode)
	}
	if err != nil {
		return noHandle, fmt.Errorf("open lock file %s: %w", p, err)
	}
	return fd, nil
}

// readRecord reads and decodes the record of the file open at fd into r,
// using buf (recMax bytes). A held record written with another mechanism
// than lk's fails with ErrMechanism.
func readRecord(lk locker, fd handle, buf []byte, r *record) error {
	n, err := pread(fd, buf[:recMax], 0)
	if err != nil {
		return fmt.Errorf("read lock file: %w", err)
	}
	if err := decode(buf[:n], r); err != nil {
		return err
	}
	if r.mark != lk.mark() && r.held() {
		return fmt.Errorf("%w: every process sharing the directory must use the same (Options.Mechanism)", ErrMechanism)
	}
	return nil
}

// writeRecord encodes r into buf and writes it at the start of the file.
func writeRecord(lk locker, fd handle, buf []byte, r *record, token string) error {
	r.mark = lk.mark()
	out := encode(buf, r, token)
	n, err := pwrite(fd, out, 0)
	if err == nil && n != len(out) {
		err = fmt.Errorf("short write (%d of %d bytes)", n, len(out))
	}
	if err != nil {
		return fmt.Errorf("write lock file: %w", err)
	}
	return nil
}

func checkToken(token string) error {
	if token == "" {
		return errors.New("mutexfx/file: empty token")
	}
	if len(token) > MaxTokenLen {
		return fmt.Errorf("mutexfx/file: token of %d bytes, over the maximum %d", len(token), MaxTokenLen)
	}
	return nil
}

func (d *Driver) checkOpen() error { return kit.CheckOpen(&d.mu, &d.closed) }

// Close closes the file descriptors of the locks the driver still holds
// (which frees them for other processes at once, as the end of the process
// would) and stops the wake-up watcher. Later calls fail with ErrClosed.
func (d *Driver) Close(ctx context.Context) error {
	var (
		hs map[heldKey]*holder
		ws []*watcher
	)
	if !kit.CloseOnce(&d.mu, &d.closed, func() {
		hs, d.held = d.held, nil
		ws = d.takeWatchers()
		d.subs.Clear()
	}) {
		return nil
	}
	for _, h := range hs {
		h.mu.Lock()
		h.close()
		h.mu.Unlock()
	}
	for _, w := range ws {
		w.stop()
	}
	return nil
}

// close closes the holder's descriptors; h.mu is held.
func (h *holder) close() {
	if h.fd != noHandle {
		_ = closeHandle(h.fd)
		h.fd = noHandle
	}
	if h.live != noHandle {
		_ = closeHandle(h.live)
		h.live = noHandle
	}
}

// sweepEvery is how many acquisitions pass between sweeps of the holders.
const sweepEvery = 64

// addHolder records a lock just acquired. It reports false when the driver
// was closed meanwhile (the caller then closes fd, freeing the lock).
//
// A holder it replaces (the same token took the lock again after its ttl ran
// out, or after another driver released it) has its descriptor closed: its
// liveness byte protects nothing any more. Every sweepEvery acquisitions it
// also closes the descriptors of locks whose ttl ran out without a later
// Extend or Release (a component that lost a lock by its own timer sends
// neither): see sweep.
func (d *Driver) addHolder(key, token string, h *holder) bool {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return false
	}
	k := heldKey{key, token}
	prev := d.held[k]
	d.held[k] = h
	d.adds++
	var stale map[heldKey]*holder
	if d.adds%sweepEvery == 0 {
		if now, err := now(); err == nil {
			for k, o := range d.held {
				if o.expiry.Load() <= now {
					if stale == nil {
						stale = make(map[heldKey]*holder)
					}
					stale[k] = o
				}
			}
		}
	}
	d.mu.Unlock()
	if prev != nil && prev != h {
		prev.mu.Lock()
		prev.close()
		prev.mu.Unlock()
	}
	if stale != nil {
		d.sweep(stale)
	}
	return true
}

// sweep drops the holders of stale whose lock really expired. A holder's
// expiry is only its own last write: another driver may have extended the
// lock since (Extend on a descriptor of its own), so each candidate's record
// is read again under the guard byte, and the holder is dropped only when
// the record no longer names it (token and fence) or its expiry has passed.
// Once passed, no Extend can move it again. A holder whose file was lost
// (deleted, replaced, its directory moved) is dropped as Release drops it,
// with its liveness file (MechanismFlock). A holder busy in another call,
// a guard byte held elsewhere or a record that cannot be read leave the
// holder for a later sweep.
func (d *Driver) sweep(stale map[heldKey]*holder) {
	buf := bufs.Get().(*[recMax]byte)
	defer bufs.Put(buf)
	for k, o := range stale {
		if !o.mu.TryLock() {
			continue
		}
		if o.fd == noHandle {
			d.dropHolder(k.key, k.token, o)
		} else if same, err := sameFile(o.fd, o.path); err == nil && !same {
			// its file was lost: no acquisition at the path will clear
			// what its liveness lock left (see Release)
			d.lk.forgetLost(o.live, o.path, int64(o.fence)+1)
			d.dropHolder(k.key, k.token, o)
		} else if !o.stillHeld(d.lk, k.token, buf[:]) {
			d.dropHolder(k.key, k.token, o)
		}
		o.mu.Unlock()
	}
}

// stillHeld reports whether the record of h's file still names h with an
// expiry to come, refreshing h.expiry from it; h.mu is held and h.fd open
// (and, as far as sweep could tell, still the file at h.path). It reports
// true when it cannot tell.
func (h *holder) stillHeld(lk locker, token string, buf []byte) bool {
	if ok, err := lk.tryGuard(h.fd); !ok || err != nil {
		return true
	}
	defer func() { _ = lk.unguard(h.fd) }()
	var rec record
	if err := readRecord(lk, h.fd, buf, &rec); err != nil {
		return true
	}
	if !rec.held() || string(rec.token) != token || rec.fence != h.fence {
		return false
	}
	now, err := now()
	if err != nil {
		return true
	}
	if rec.expiry <= now {
		return false
	}
	h.expiry.Store(rec.expiry)
	return true
}

// holderOf returns the holder of key for token in this driver, or nil.
func (d *Driver) holderOf(key, token string) *holder {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held[heldKey{key, token}]
}

// dropHolder forgets h (when it is still the holder recorded for key/token)
// and closes its descriptor; h.mu is held.
func (d *Driver) dropHolder(key, token string, h *holder) {
	d.mu.Lock()
	if d.held[heldKey{key, token}] == h {
		delete(d.held, heldKey{key, token})
	}
	d.mu.Unlock()
	h.close()
}

// now returns the monotonic time, or an error.
func now() (int64, error) { return monoNow() }

// remaining converts a record's expiry to a positive duration from now.
func remaining(expiry, now int64) time.Duration {
	if expiry <= now {
		return 0
	}
	return time.Duration(expiry - now)
}
