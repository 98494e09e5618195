//go:build darwin || dragonfly || freebsd || openbsd || windows

package file

// start does nothing: without inotify, waiters poll (the component's
// RetryDelay) and the releases of this process's own driver instance are
// still reported.
func (w *watcher) start(string) {}
