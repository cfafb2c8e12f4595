package querylog

import (
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
)

// On a file, the cut line is taken back: the log holds only whole lines,
// and those it does not hold were all counted. A small tmpfs plays the full
// disk when the test may mount one (as root); a failing writer stands in
// above otherwise.
func TestFullDiskKeepsTheLogWhole(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("prerequisite missing: mounting a tmpfs to fill (it needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmounting the tmpfs: %v", err)
		}
	})
	path := filepath.Join(dir, "query.log")
	var dropped atomic.Int64
	l, err := Open(path, Options{Dropped: func(n int) { dropped.Add(int64(n)) }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	// About 500 KB of lines into 64 KiB, synced every 100 so that the
	// writer never falls behind: every loss is a failed write's.
	const n = 5000
	for i := range n {
		if !l.Log(entry(i)) {
			t.Fatalf("line %d dropped by Log with the writer synced", i)
		}
		if i%100 == 99 {
			l.Sync()
		}
	}
	l.Sync()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	whole, broken := lines(data)
	if len(broken) != 0 || len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("a full disk tore the log: %d broken lines, last byte %q", len(broken), data[len(data)-1:])
	}
	if dropped.Load() == 0 || int64(len(whole))+dropped.Load() != n {
		t.Errorf("%d lines in the file and %d counted dropped, want %d in all", len(whole), dropped.Load(), n)
	}

	// Room again: writing resumes, whole lines.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		l.Log(entry(n + i))
	}
	l.Sync()
	data, err = os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if whole, broken := lines(data); len(whole) != 10 || len(broken) != 0 {
		t.Errorf("after the disk had room again: %d whole and %d broken lines, want 10 and 0", len(whole), len(broken))
	}
}
