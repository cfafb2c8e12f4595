package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A directory nxdnsd may not write in is refused: a read-only tmpfs as
// root (who may write anywhere else), a directory without write permission
// otherwise.
func TestQueryLogPathNotWritable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_RDONLY, "size=16k"); err != nil {
			t.Skipf("prerequisite missing: mounting a read-only tmpfs (root may write to any directory otherwise): %v", err)
		}
		t.Cleanup(func() {
			if err := syscall.Unmount(dir, 0); err != nil {
				t.Errorf("unmounting the tmpfs: %v", err)
			}
		})
	} else if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	} else {
		t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	}
	ps := queryLogProblems(t, filepath.Join(dir, "query.log"))
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "not writable") {
		t.Errorf("problems %v, want one saying the directory is not writable", ps)
	}
}
