//go:build linux || darwin || dragonfly || freebsd || openbsd

package file

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// handle is an open file: a file descriptor.
type handle = int

// noHandle is no open file.
const noHandle handle = -1

// openFile opens path for reading and writing, not following a symbolic
// link; with create it creates a missing file with mode.
func openFile(path string, create bool, mode fs.FileMode) (handle, error) {
	flags := unix.O_RDWR | unix.O_CLOEXEC | unix.O_NOFOLLOW
	if create {
		flags |= unix.O_CREAT
	}
	return unix.Open(path, flags, uint32(mode))
}

// openReadOnly opens path for reading, not following a symbolic link (nor
// blocking on a FIFO put at the path).
func openReadOnly(path string) (handle, error) {
	return unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
}

func closeHandle(h handle) error                        { return unix.Close(h) }
func pread(h handle, b []byte, off int64) (int, error)  { return unix.Pread(h, b, off) }
func pwrite(h handle, b []byte, off int64) (int, error) { return unix.Pwrite(h, b, off) }

// isNotDir reports a path one of whose directories is a file.
func isNotDir(err error) bool { return errors.Is(err, unix.ENOTDIR) }

// statFD reads the fileID of the open file h.
func statFD(h handle) (fileID, error) { return statID(h, "") }

// statPath reads the fileID of the file at path, not following a link.
func statPath(path string) (fileID, error) { return statID(unix.AT_FDCWD, path) }

// syncDir flushes the directory dir (its entries) to disk.
func syncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open lock directory: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return fmt.Errorf("fsync lock directory: %w", err)
	}
	return nil
}

// hostClock reads the host's monotonic clock (hostClockID) in nanoseconds.
func hostClock() (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(hostClockID, &ts); err != nil {
		return 0, fmt.Errorf("clock_gettime: %w", err)
	}
	return ts.Nano(), nil
}
