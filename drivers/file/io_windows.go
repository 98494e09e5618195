package file

import (
	"errors"
	"fmt"
	"io/fs"
	"unsafe"

	"golang.org/x/sys/windows"
)

// handle is an open file: a Windows file handle.
type handle = windows.Handle

// noHandle is no open file.
const noHandle = windows.InvalidHandle

// shareAll lets other handles read, write and delete (rename) the file, as
// on Unix: the locks, not the sharing mode, exclude.
const shareAll = windows.FILE_SHARE_READ | windows.FILE_SHARE_WRITE | windows.FILE_SHARE_DELETE

func createFile(path string, access, disposition, flags uint32) (handle, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return noHandle, err
	}
	// FILE_FLAG_OPEN_REPARSE_POINT opens a symbolic link itself, which
	// statFD then refuses as not a regular file (O_NOFOLLOW on Unix).
	return windows.CreateFile(p, access, shareAll, nil, disposition, flags|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
}

// openFile opens path for reading and writing; with create it creates a
// missing file (mode is not used: the directory's ACL applies).
func openFile(path string, create bool, _ fs.FileMode) (handle, error) {
	disposition := uint32(windows.OPEN_EXISTING)
	if create {
		disposition = windows.OPEN_ALWAYS
	}
	return createFile(path, windows.GENERIC_READ|windows.GENERIC_WRITE, disposition, windows.FILE_ATTRIBUTE_NORMAL)
}

// openReadOnly opens path for reading.
func openReadOnly(path string) (handle, error) {
	return createFile(path, windows.GENERIC_READ, windows.OPEN_EXISTING, windows.FILE_ATTRIBUTE_NORMAL)
}

func closeHandle(h handle) error { return windows.CloseHandle(h) }

func overlapped(off int64) *windows.Overlapped {
	return &windows.Overlapped{Offset: uint32(off), OffsetHigh: uint32(uint64(off) >> 32)}
}

func pread(h handle, b []byte, off int64) (int, error) {
	var n uint32
	err := windows.ReadFile(h, b, &n, overlapped(off))
	if errors.Is(err, windows.ERROR_HANDLE_EOF) {
		err = nil // read at or past the end: n is 0
	}
	return int(n), err
}

func pwrite(h handle, b []byte, off int64) (int, error) {
	var n uint32
	err := windows.WriteFile(h, b, &n, overlapped(off))
	return int(n), err
}

// isNotDir: a path through a file is ERROR_PATH_NOT_FOUND, which is
// fs.ErrNotExist already.
func isNotDir(error) bool { return false }

// statFD reads the fileID of the open file h.
func statFD(h handle) (fileID, error) {
	var fi windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(h, &fi); err != nil {
		return fileID{}, err
	}
	return fileID{
		regular: fi.FileAttributes&(windows.FILE_ATTRIBUTE_DIRECTORY|windows.FILE_ATTRIBUTE_REPARSE_POINT) == 0,
		links:   fi.NumberOfLinks,
		dev:     uint64(fi.VolumeSerialNumber),
		ino:     uint64(fi.FileIndexHigh)<<32 | uint64(fi.FileIndexLow),
	}, nil
}

// statPath reads the fileID of the file at path, not following a link.
func statPath(path string) (fileID, error) {
	h, err := createFile(path, 0, windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS)
	if err != nil {
		return fileID{}, err
	}
	defer windows.CloseHandle(h)
	return statFD(h)
}

// fdatasync flushes the file h to disk.
func fdatasync(h handle) error { return windows.FlushFileBuffers(h) }

// syncDir does nothing: Windows flushes no directory handle.
func syncDir(string) error { return nil }

var (
	kernel32     = windows.NewLazySystemDLL("kernel32.dll")
	procQPC      = kernel32.NewProc("QueryPerformanceCounter")
	procQPCFreqs = kernel32.NewProc("QueryPerformanceFrequency")
)

// hostClock reads the performance counter, the same for every process of
// the host and not moved by wall-clock steps, in nanoseconds.
func hostClock() (int64, error) {
	var count, freq int64
	if r, _, err := procQPCFreqs.Call(uintptr(unsafe.Pointer(&freq))); r == 0 || freq <= 0 {
		return 0, fmt.Errorf("QueryPerformanceFrequency: %w", err)
	}
	if r, _, err := procQPC.Call(uintptr(unsafe.Pointer(&count))); r == 0 {
		return 0, fmt.Errorf("QueryPerformanceCounter: %w", err)
	}
	return count/freq*1e9 + count%freq*1e9/freq, nil
}
