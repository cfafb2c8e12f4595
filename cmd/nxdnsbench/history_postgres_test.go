package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// A real run of the history rows with PostgreSQL: dnsperf, nxdnsd and a
// throwaway server, every figure of the table measured.
func TestHistoryPostgresSmoke(t *testing.T) {
	if os.Getenv("NXDNSBENCH_HISTORY_PG") != "1" {
		t.Skip("a real run of dnsperf, nxdnsd and PostgreSQL, 10,000 names: set NXDNSBENCH_HISTORY_PG=1 to run it")
	}
	var out, errs bytes.Buffer
	err := runCmd(context.Background(), []string{"-l", "2s", "-names", "10000", "-latency", "0", "-bursts=false", "-dnsdist=false",
		"-hits=false", "-encrypted=false", "-peers-blocking", "0", "-history", "-history-store", "postgres", "-history-qps", "2000"}, &out, &errs)
	if err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	text := out.String()
	_, table, ok := strings.Cut(text, "### Query history: on, in PostgreSQL (issue 32)")
	if !ok {
		t.Fatalf("no PostgreSQL history table:\n%s", text)
	}
	table, _, _ = strings.Cut(table, "\n\nThe rows")
	for _, row := range []string{"| forwarding: 10,000 names |", "| forwarding at dnsperf -Q 2000 |"} {
		i := strings.Index(table, row)
		if i < 0 {
			t.Errorf("no row %q:\n%s", row, table)
			continue
		}
		line, _, _ := strings.Cut(table[i:], "\n")
		if strings.Contains(line, "?") || strings.Count(line, " µs") < 2 {
			t.Errorf("row not measured in full: %s", line)
		}
	}
	if !strings.Contains(text, "- pass: issue 32, forwarding at dnsperf -Q 2000 for 2s with history.postgres: ") {
		t.Errorf("rows lost at 2,000 queries a second:\n%s", text)
	}
}
