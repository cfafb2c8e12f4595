package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procPeakRSS returns a process's peak resident set size in bytes, VmHWM in
// /proc/PID/status.
func procPeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmHWM", pid)
}

// procCPUTime returns the user plus system CPU time a process has used, all
// its threads, from /proc/PID/stat.
func procCPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	d, err := parseProcStatCPU(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return d, nil
}

// parseProcStatCPU reads utime and stime, fields 14 and 15 of a
// /proc/PID/stat line, in clock ticks, and returns their sum.
func parseProcStatCPU(b []byte) (time.Duration, error) {
	// The command name, field 2, is in parentheses and may hold spaces and
	// parentheses: count fields from after its last closing parenthesis
	// (field 3 is first).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name", len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil || utime < 0 || stime < 0 {
		return 0, fmt.Errorf("utime %q stime %q", f[11], f[12])
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// cpuSplit is the machine's CPU time since boot, all cores, from
// /proc/stat.
type cpuSplit struct {
	Tasks   time.Duration // user, nice and system: what processes are charged with
	SoftIRQ time.Duration // irq and softirq: on loopback, mostly packet delivery, charged to no process
}

// machineCPU reads the machine's CPU time so far. Over an interval, the
// Tasks time the benchmark's own processes were not charged with went to
// other processes.
func machineCPU() cpuSplit {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSplit{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq ...
	if len(f) < 8 || f[0] != "cpu" {
		return cpuSplit{}
	}
	tick := func(i int) time.Duration {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		return time.Duration(n) * time.Second / clockTicks
	}
	return cpuSplit{Tasks: tick(1) + tick(2) + tick(3), SoftIRQ: tick(6) + tick(7)}
}

func (a cpuSplit) sub(b cpuSplit) cpuSplit {
	return cpuSplit{Tasks: a.Tasks - b.Tasks, SoftIRQ: a.SoftIRQ - b.SoftIRQ}
}

// selfCPUTime returns the CPU time this process has used: the in-process
// fake upstreams and the load client.
func selfCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machine describes where a benchmark ran.
type machine struct {
	CPUs      int
	CPUModel  string
	GoVersion string
	Commit    string // git describe of the work tree, "-dirty" when it has changes
	Nxdnsd    string // nxdnsd -version
	LoadStart string // /proc/loadavg's 1, 5 and 15 minute figures
	LoadEnd   string
	Started   time.Time

	ConntrackStart, ConntrackEnd conntrack
}

func readMachine(ctx context.Context, nxdnsd string) machine {
	m := machine{
		CPUs:      runtime.NumCPU(),
		CPUModel:  cpuModel(),
		GoVersion: runtime.Version(),
		Commit:    command(ctx, "git", "describe", "--always", "--dirty", "--abbrev=7"),
		Nxdnsd:    command(ctx, nxdnsd, "-version"),
		LoadStart: loadAverage(),
		Started:   time.Now().UTC(),

		ConntrackStart: readConntrack(),
	}
	return m
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// loadAverage returns the 1, 5 and 15 minute load averages: above zero
// while nothing of the benchmark runs, they say others use the machine.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// command runs a short command and returns its trimmed output, or "?".
func command(ctx context.Context, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

// conntrack is the kernel's connection tracking as a run found it. With it
// loaded (a firewall, NAT, a container runtime's rules), every upstream
// query from a port of its own is an entry for 30 s
// (nf_conntrack_udp_timeout): at tens of thousands of queries a second the
// table fills, and the kernel drops packets it cannot track, which shows
// as lost queries and 2.5 s attempts in the figures.
type conntrack struct {
	On         bool
	Count, Max int
	Drops      uint64 // the drop and insert_failed columns of /proc/net/stat/nf_conntrack, all CPUs
}

func readConntrack() conntrack {
	count, err1 := os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_count")
	limit, err2 := os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_max")
	if err1 != nil || err2 != nil {
		return conntrack{}
	}
	ct := conntrack{On: true}
	ct.Count, _ = strconv.Atoi(strings.TrimSpace(string(count)))
	ct.Max, _ = strconv.Atoi(strings.TrimSpace(string(limit)))
	ct.Drops = conntrackDrops()
	return ct
}

// conntrackDrops sums, over the CPUs, the packets connection tracking
// dropped: its statistics' drop and insert_failed columns, named by the
// file's header line.
func conntrackDrops() uint64 {
	b, err := os.ReadFile("/proc/net/stat/nf_conntrack")
	if err != nil {
		return 0
	}
	return parseConntrackDrops(b)
}

func parseConntrackDrops(b []byte) uint64 {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) < 2 {
		return 0
	}
	var cols []int
	for i, name := range strings.Fields(lines[0]) {
		if name == "drop" || name == "insert_failed" {
			cols = append(cols, i)
		}
	}
	var sum uint64
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		for _, i := range cols {
			if i < len(f) {
				v, _ := strconv.ParseUint(f[i], 16, 64)
				sum += v
			}
		}
	}
	return sum
}

// conntrackLine says in the report what connection tracking did during
// the run.
func conntrackLine(start, end conntrack) string {
	if !start.On {
		return "- connection tracking: not loaded\n"
	}
	s := fmt.Sprintf("- connection tracking (nf_conntrack): %d of %d entries before, %d after; %d packets dropped during the run",
		start.Count, start.Max, end.Count, end.Drops-start.Drops)
	if end.Drops > start.Drops {
		s += " — **the table was full: lost queries and 2.5 s attempts in this run are the kernel's, not comparable** (exempt loopback from tracking or raise nf_conntrack_max, see docs/operations.md)"
	}
	return s + "\n"
}
