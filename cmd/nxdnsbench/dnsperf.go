package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"time"
)

// perfParams are dnsperf's load parameters, the by default:
// -l 10 -c 20 -q 100 -T 2.
type perfParams struct {
	Duration    time.Duration // -l
	Clients     int           // -c
	Outstanding int           // -q
	Threads     int           // -T

	// Mode is -m: "" (UDP), "dot" or "doh" (GET to https://ADDR/dns-query).
	Mode   string
	MaxQPS int // -Q, when > 0: dnsperf sends at most this many queries a second
}

func (p perfParams) String() string {
	s := fmt.Sprintf("-l %g -c %d -q %d -T %d", p.Duration.Seconds(), p.Clients, p.Outstanding, p.Threads)
	if p.MaxQPS > 0 {
		s += fmt.Sprintf(" -Q %d", p.MaxQPS)
	}
	return s
}

// perfResult is one dnsperf run as its statistics report it.
type perfResult struct {
	Sent, Completed, Lost int
	QPS                   float64
	RunTime               time.Duration
	MeanLatency           time.Duration
	MaxLatency            time.Duration
	CPU                   time.Duration // dnsperf's own CPU time, user and system
	Wall                  time.Duration // dnsperf's whole run, start-up included
}

// writeQueryFile writes dnsperf's input: n distinct names,
// PREFIX<i>.bench.example. A. With the throughput rows' million names no
// cache anywhere helps; the hits rows' thousand are asked over and over.
func writeQueryFile(path, prefix string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	var line []byte
	for i := range n {
		line = append(line[:0], prefix...)
		line = strconv.AppendInt(line, int64(i), 10)
		line = append(line, ".bench.example. A\n"...)
		if _, err := w.Write(line); err != nil {
			_ = f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// dnsperfWaitSlack is how long past its -l limit dnsperf may take: its own
// start-up (reading the query file) and the wait for queries still
// outstanding at the end (its -t timeout, 5 s by default).
const dnsperfWaitSlack = 20 * time.Second

// runDNSPerf runs dnsperf against target over UDP (or p.Mode) and parses its
// statistics. It is killed, with its process group, if it outlives
// p.Duration + dnsperfWaitSlack or ctx.
func runDNSPerf(ctx context.Context, bin, queries string, target netip.AddrPort, p perfParams) (*perfResult, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Duration+dnsperfWaitSlack)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"-s", target.Addr().String(), "-p", strconv.Itoa(int(target.Port())),
		"-d", queries,
		"-l", strconv.FormatFloat(p.Duration.Seconds(), 'f', -1, 64),
		"-c", strconv.Itoa(p.Clients), "-q", strconv.Itoa(p.Outstanding), "-T", strconv.Itoa(p.Threads))
	if p.Mode != "" {
		cmd.Args = append(cmd.Args, "-m", p.Mode)
	}
	if p.Mode == "doh" {
		cmd.Args = append(cmd.Args, "-O", "doh-uri=https://"+target.String()+"/dns-query")
	}
	if p.MaxQPS > 0 {
		cmd.Args = append(cmd.Args, "-Q", strconv.Itoa(p.MaxQPS))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err() // interrupted or past its time: say so, not "signal: killed"
		}
		return nil, fmt.Errorf("dnsperf: %w: %s", err, lastLines(stderr.String()+stdout.String(), 5))
	}
	r, err := parseDNSPerf(stdout.Bytes())
	if err != nil {
		return nil, err
	}
	r.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	r.Wall = wall
	return r, nil
}

// The lines of dnsperf's statistics that the benchmark reads (dnsperf 2.x):
//
//	Queries sent:         665043
//	Queries completed:    665043 (100.00%)
//	Queries lost:         0 (0.00%)
//	Run time (s):         3.000241
//	Queries per second:   221663.193057
//	Average Latency (s):  0.000311 (min 0.000006, max 0.010860)
var (
	reSent      = regexp.MustCompile(`(?m)^\s*Queries sent:\s+(\d+)`)
	reCompleted = regexp.MustCompile(`(?m)^\s*Queries completed:\s+(\d+)`)
	reLost      = regexp.MustCompile(`(?m)^\s*Queries lost:\s+(\d+)`)
	reRunTime   = regexp.MustCompile(`(?m)^\s*Run time \(s\):\s+([0-9.]+)`)
	reQPS       = regexp.MustCompile(`(?m)^\s*Queries per second:\s+([0-9.]+)`)
	reLatency   = regexp.MustCompile(`(?m)^\s*Average Latency \(s\):\s+([0-9.]+) \(min [0-9.]+, max ([0-9.]+)\)`)
)

// parseDNSPerf reads dnsperf's statistics. A run that completed no query
// prints no latency line; its latencies stay zero.
func parseDNSPerf(out []byte) (*perfResult, error) {
	r := &perfResult{}
	ints := []struct {
		re  *regexp.Regexp
		dst *int
	}{{reSent, &r.Sent}, {reCompleted, &r.Completed}, {reLost, &r.Lost}}
	for _, f := range ints {
		m := f.re.FindSubmatch(out)
		if m == nil {
			return nil, fmt.Errorf("dnsperf output has no %q line: %s", f.re, lastLines(string(out), 5))
		}
		*f.dst, _ = strconv.Atoi(string(m[1])) // \d+ parses
	}
	m := reQPS.FindSubmatch(out)
	if m == nil {
		return nil, errors.New("dnsperf output has no queries-per-second line")
	}
	r.QPS, _ = strconv.ParseFloat(string(m[1]), 64)
	if m := reRunTime.FindSubmatch(out); m != nil {
		r.RunTime = seconds(m[1])
	}
	if m := reLatency.FindSubmatch(out); m != nil {
		r.MeanLatency, r.MaxLatency = seconds(m[1]), seconds(m[2])
	}
	return r, nil
}

func seconds(b []byte) time.Duration {
	f, _ := strconv.ParseFloat(string(b), 64)
	return time.Duration(f * float64(time.Second))
}

// lastLines returns the last n lines of s, for error messages.
func lastLines(s string, n int) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte(" | ")))
}
