// Package safefile opens and reads the files an operator names (the -c
// configuration, cache.path, and the lists and other files a
// configuration points at) so that a mistake cannot stall or exhaust the
// daemon: only a regular file is read, after following symlinks (a
// Kubernetes ConfigMap's files are symlinks, and are fine), and never more
// of it than its purpose needs. A FIFO would block the open and every read
// until a writer came; /dev/zero and its kin never end.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrNotRegular is what Open and ReadFile report, wrapped, for a path
// that leads to something other than a regular file: a directory, a FIFO,
// a device, a socket.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is what Open and ReadFile report, wrapped, for a file larger
// than their bound.
var ErrTooLarge = errors.New("file too large")

// Open opens path for reading, following symlinks, and returns the file
// and its size. It refuses, without blocking, anything but a regular file
// (ErrNotRegular) and a file of more than maxBytes (ErrTooLarge). A
// missing file is an error matching fs.ErrNotExist. The caller reads at
// most the size returned: a file that grows after the open is read no
// further.
func Open(path string, maxBytes int64) (*os.File, int64, error) {
	// Non-blocking, so that a FIFO with no writer does not block the
	// open; Stat below refuses it. A regular file ignores the flag.
	f, err := os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: %s", ErrNotRegular, describe(path, fi.Mode()))}
	}
	if fi.Size() > maxBytes {
		f.Close()
		return nil, 0, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrTooLarge, fi.Size(), maxBytes)}
	}
	return f, fi.Size(), nil
}

// ReadFile is os.ReadFile for a regular file of at most maxBytes: it
// refuses what Open refuses, and a file that grew past maxBytes while it
// was read (ErrTooLarge). It allocates at most the file's size and a
// byte.
func ReadFile(path string, maxBytes int64) ([]byte, error) {
	f, size, err := Open(path, maxBytes)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// One byte more than the size, to see growth without reading it all.
	b := make([]byte, 0, size+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if len(b) == cap(b) {
			if int64(len(b)) > maxBytes {
				return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: it grew past the %d bytes allowed while it was read", ErrTooLarge, maxBytes)}
			}
			b = append(b, 0)[:len(b)] // grown while read, still within the bound
		}
	}
}

// describe says what path, which is not a regular file, leads to, and
// what would do instead.
func describe(path string, m fs.FileMode) string {
	what, target := Kind(path, m)
	if target != "" {
		what = "it leads through symlinks to " + target + ", " + what
	}
	return what + "; only a regular file is read (a symlink to one, as a ConfigMap mounts, is fine)"
}

// Kind names what path, whose mode m (os.Stat's, symlinks followed) is not
// a regular file's, is: "a directory", "a FIFO (named pipe)", a device, a
// socket. target is the file path leads to when it leads there through
// symlinks, "" when it does not: the operator sees where a link went.
func Kind(path string, m fs.FileMode) (kind, target string) {
	if t, err := filepath.EvalSymlinks(path); err == nil && t != filepath.Clean(path) {
		target = t
	}
	return modeKind(m), target
}

// modeKind names what a mode that is not a regular file's is.
func modeKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	default:
		return "not a regular file (" + m.Type().String() + ")"
	}
}
