//go:build !linux

package postgres

import "net"

// watcher is a no-op outside Linux: a broken pinned connection is found by
// the next statement or probe (every ttl/3 through renewals).
type watcher struct{}

func startWatch(net.Conn, chan struct{}, func(), func()) *watcher { return &watcher{} }

func (*watcher) stop() {}
