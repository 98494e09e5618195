package file

import (
	"bytes"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/mutexfx/mutexfx/drivers"
)

// start opens the inotify descriptor and starts the goroutine, unless stop
// came first. On failure nothing runs and waiters poll.
func (w *watcher) start(dir string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CLOSE_WRITE|unix.IN_MOVE_SELF); err != nil {
		_ = unix.Close(fd)
		return
	}
	// A non-blocking descriptor gives a File read through the runtime poller,
	// so Close ends a pending Read.
	w.f = os.NewFile(uintptr(fd), "inotify:"+dir)
	go w.run(w.f)
}

func (w *watcher) run(f *os.File) {
	defer close(w.done)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := f.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			end := off + unix.SizeofInotifyEvent + int(ev.Len)
			if end > n {
				break
			}
			if ev.Mask&(unix.IN_IGNORED|unix.IN_MOVE_SELF) != 0 {
				w.gone()
				_ = f.Close() // stop closes it again: harmless
				return
			}
			name := buf[off+unix.SizeofInotifyEvent : end]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if key, ok := w.d.keyOf(name); ok {
				w.d.emit(drivers.Event{Kind: drivers.Released, Key: key})
			}
			off = end
		}
	}
}

// keyOf returns the key of a lock file found held recently.
func (d *Driver) keyOf(name []byte) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.busy[string(name)]
	if !ok || time.Since(e.at) >= busyFor {
		return "", false
	}
	return e.key, true
}

// gone marks dead a watcher whose directory was removed (inotify then
// drops the watch: IN_IGNORED) or moved away (IN_MOVE_SELF), so that the
// next contention replaces it with one on the directory at the path; its
// goroutine then ends. Replaced, it is retired, not stopped: the last
// unsubscribe or Close stops it and waits for it. The locks whose files
// went with the directory are free: their waiters are told.
func (w *watcher) gone() {
	d := w.d
	d.mu.Lock()
	w.dead = true
	var keys []string
	for _, e := range d.busy {
		keys = append(keys, e.key)
	}
	d.mu.Unlock()
	for _, k := range keys {
		d.emit(drivers.Event{Kind: drivers.Released, Key: k})
	}
}
