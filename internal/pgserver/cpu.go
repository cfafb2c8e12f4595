package pgserver

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// CPU is the user and system CPU time the server's processes have used
// so far (treeCPU of the postmaster): the difference of two readings is
// what the server cost in between, for a benchmark that runs it on the
// same machine as what it measures.
func (s *Server) CPU() (time.Duration, error) {
	pid, err := s.PID()
	if err != nil {
		return 0, err
	}
	return treeCPU("/proc", pid)
}

// treeCPU is the user and system CPU time a process and its children
// have used so far, from proc (/proc): the root's own and that of its
// children it has waited for (cutime, cstime: the backends that ended),
// plus each live child's own and its waited-for children's. The
// difference of two readings is what the tree used in between, the
// children that started or ended meanwhile included. PostgreSQL's
// processes are all the postmaster's children; a grandchild still
// running is not seen (PostgreSQL has none).
func treeCPU(proc string, root int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(root), "stat"))
	if err != nil {
		return 0, err
	}
	st, err := parseProcStat(b)
	if err != nil {
		return 0, fmt.Errorf("%s/%d/stat: %w", proc, root, err)
	}
	total := st.self + st.children
	dirs, err := os.ReadDir(proc)
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == root {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, d.Name(), "stat"))
		if err != nil {
			continue // ended since the directory was read: its time is in the root's cutime
		}
		if st, err := parseProcStat(b); err == nil && st.ppid == root {
			total += st.self + st.children
		}
	}
	return total, nil
}

// procStat is what treeCPU reads of a /proc/PID/stat line.
type procStat struct {
	ppid     int
	self     time.Duration // utime + stime
	children time.Duration // cutime + cstime
}

// parseProcStat reads fields 4 (ppid) and 14 to 17 (utime, stime, cutime,
// cstime, in clock ticks) of a /proc/PID/stat line.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')') // the command name may hold spaces and parentheses
	if i < 0 {
		return procStat{}, errors.New("no command name")
	}
	f := strings.Fields(string(b[i+1:])) // field 3 first
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("%d fields after the command name", len(f))
	}
	var n [5]int64
	for j, k := range []int{1, 11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil || v < 0 {
			return procStat{}, fmt.Errorf("field %d: %q", k+3, f[k])
		}
		n[j] = v
	}
	tick := func(v int64) time.Duration { return time.Duration(v) * time.Second / clockTicks }
	return procStat{ppid: int(n[0]), self: tick(n[1] + n[2]), children: tick(n[3] + n[4])}, nil
}
