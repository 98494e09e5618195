//go:build darwin || dragonfly || freebsd || openbsd

package file

import "golang.org/x/sys/unix"

// statID reads the fileID of the file open at fd (path "") or at path
// (not following a symbolic link).
func statID(fd int, path string) (fileID, error) {
	var st unix.Stat_t
	var err error
	if path == "" {
		err = unix.Fstat(fd, &st)
	} else {
		err = unix.Lstat(path, &st)
	}
	return fileID{st.Mode&unix.S_IFMT == unix.S_IFREG, uint32(st.Nlink), uint64(st.Dev), uint64(st.Ino)}, err
}

// fdatasync flushes the file open at fd (these systems have no fdatasync
// in golang.org/x/sys, or only fsync's cost).
func fdatasync(fd int) error { return unix.Fsync(fd) }
