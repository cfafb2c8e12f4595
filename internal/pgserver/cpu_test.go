package pgserver

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// stat is a /proc/PID/stat line: ppid, then utime, stime, cutime and
// cstime in clock ticks; the command name has a space and a parenthesis.
func stat(pid, ppid int, utime, stime, cutime, cstime int) string {
	return fmt.Sprintf("%d (postgres: a) b) S %d %d %d 0 -1 4194560 1 0 0 0 %d %d %d %d 20 0 1 0 100 1000 10\n",
		pid, ppid, pid, pid, utime, stime, cutime, cstime)
}

// treeCPU sums the root's own and waited-for children's time and that of
// its live children, not of other processes, nor a grandchild's own;
// a directory that is no process is passed over.
func TestTreeCPU(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(proc, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if content != "" {
			if err := os.WriteFile(filepath.Join(proc, name, "stat"), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("100", stat(100, 1, 10, 5, 200, 100))  // the postmaster: 15 + 300 ended children's
	write("101", stat(101, 100, 40, 10, 0, 0))   // a backend: 50
	write("102", stat(102, 100, 1, 1, 3, 0))     // the checkpointer: 2 + 3
	write("103", stat(103, 102, 1000, 0, 0, 0))  // a grandchild: not seen
	write("200", stat(200, 1, 5000, 5000, 0, 0)) // another process
	write("104", "")                             // ended while the directory was read
	write("self", stat(999, 100, 7000, 0, 0, 0)) // not a PID
	got, err := treeCPU(proc, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Duration(15+300+50+5) * time.Second / clockTicks; got != want {
		t.Errorf("treeCPU %v, want %v", got, want)
	}
	if _, err := treeCPU(proc, 300); err == nil {
		t.Error("treeCPU of a process that does not exist: no error")
	}
	if _, err := parseProcStat([]byte("105 (x) S 100 1 2\n")); err == nil {
		t.Error("parseProcStat of a short line: no error")
	}
	if _, err := parseProcStat([]byte(stat(1, 0, -1, 0, 0, 0))); err == nil {
		t.Error("parseProcStat of a negative utime: no error")
	}
}
