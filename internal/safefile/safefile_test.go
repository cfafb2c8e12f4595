package safefile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func write(tb testing.TB, path string, b []byte) string {
	tb.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// A regular file is read whole, through a chain of symlinks as a ConfigMap
// mounts it (file -> ..data/file, ..data -> a timestamped directory).
func TestReadFileRegular(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "..2026_12_01"), 0o700); err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("x"), 1000)
	write(t, filepath.Join(dir, "..2026_12_01", "nxdns.toml"), want)
	if err := os.Symlink("..2026_12_01", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "nxdns.toml")
	if err := os.Symlink("..data/nxdns.toml", link); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int64{1000, 1 << 20} {
		got, err := ReadFile(link, limit)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("limit %d: %d bytes, %v", limit, len(got), err)
		}
	}
	if got, err := ReadFile(write(t, filepath.Join(dir, "empty"), nil), 10); err != nil || len(got) != 0 {
		t.Fatalf("empty file: %q, %v", got, err)
	}
}

// Past the bound is ErrTooLarge; a missing file is fs.ErrNotExist.
func TestReadFileRefusesLargeAndMissing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := write(t, filepath.Join(dir, "big"), make([]byte, 1001))
	if _, err := ReadFile(p, 1000); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("1001 bytes with a bound of 1000: %v", err)
	}
	if _, _, err := Open(p, 1000); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Open: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing"), 1000); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}

// What is not a regular file is refused at once, naming what it is: a
// directory, a device (through a symlink, which the message shows), a
// FIFO without a writer (whose open would otherwise block until one came).
func TestReadFileRefusesWhatIsNotRegular(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, says string }{
		{dir, "a directory"},
		{zero, "symlinks to /dev/zero, a character device"},
		{fifo, "a FIFO"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := ReadFile(c.path, 1<<20)
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second): // a bound for a blocked open, not a timing assertion
			if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close() // releases the blocked open
			}
			t.Fatalf("%s: ReadFile blocked", c.path)
		}
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), c.says) ||
			!strings.Contains(err.Error(), "a symlink to one") {
			t.Errorf("%s: %v, want ErrNotRegular saying %q", c.path, err, c.says)
		}
	}
}
