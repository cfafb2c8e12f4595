package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/fake"
	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/load"
)

// runConfig is `nxdnsbench run`'s flags.
type runConfig struct {
	nxdnsd  string // the binary under test; "" builds ./cmd/nxdnsd
	rev     string // build nxdnsd from this git revision instead of the work tree
	dnsperf string
	perf    perfParams
	names   int

	latency         time.Duration // the load client's run per target
	latencyInFlight int

	throughput, bursts bool
	burstQueries       int
	burstInFlight      int
	burstTimeout       time.Duration

	sockets    int    // UDP sockets per fake upstream
	out        string // also write the report here
	perfRecord string // record a perf profile of nxdnsd under dnsperf here
	keep       bool   // keep the work directory
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c runConfig
	fs := flag.NewFlagSet("nxdnsbench run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.nxdnsd, "nxdnsd", "", "nxdnsd binary to measure (default: go build ./cmd/nxdnsd into the work directory)")
	fs.StringVar(&c.rev, "rev", "", "build nxdnsd from this git `revision` (git archive) instead of the work tree")
	fs.StringVar(&c.dnsperf, "dnsperf", "dnsperf", "dnsperf binary")
	fs.DurationVar(&c.perf.Duration, "l", 10*time.Second, "dnsperf -l: each throughput run's length")
	fs.IntVar(&c.perf.Clients, "c", 20, "dnsperf -c: clients")
	fs.IntVar(&c.perf.Outstanding, "q", 100, "dnsperf -q: queries outstanding")
	fs.IntVar(&c.perf.Threads, "T", 2, "dnsperf -T: threads")
	fs.IntVar(&c.names, "names", 1_000_000, "distinct names in dnsperf's query file")
	fs.DurationVar(&c.latency, "latency", 3*time.Second, "load-client run per target for latency percentiles (0 skips)")
	fs.IntVar(&c.latencyInFlight, "latency-inflight", 100, "load-client queries in flight for the percentiles")
	fs.BoolVar(&c.throughput, "throughput", true, "measure throughput and latency")
	fs.BoolVar(&c.bursts, "bursts", true, "run the four fault bursts")
	fs.IntVar(&c.burstQueries, "burst-queries", 2000, "queries per fault burst")
	fs.IntVar(&c.burstInFlight, "burst-inflight", 200, "queries in flight in a fault burst")
	fs.DurationVar(&c.burstTimeout, "burst-timeout", 5*time.Second, "client timeout in a fault burst")
	fs.IntVar(&c.sockets, "fake-sockets", 0, "UDP sockets per fake upstream (0: one per CPU)")
	fs.StringVar(&c.out, "o", "", "also write the report (markdown) to this file")
	fs.StringVar(&c.perfRecord, "perf-record", "", "record `file` with perf (cpu-clock, call graphs) of nxdnsd during its dnsperf run")
	fs.BoolVar(&c.keep, "keep", false, "keep the work directory (configs, nxdnsd logs, query file)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("run: unexpected arguments %v", fs.Args())
	}
	if c.perf.Duration <= 0 || c.perf.Duration > 10*time.Minute || c.names < 1 || c.names > 10_000_000 {
		return errors.New("run: want 0 < -l <= 10m and 1 <= -names <= 10,000,000")
	}
	if c.throughput {
		p, err := exec.LookPath(c.dnsperf)
		if err != nil {
			return fmt.Errorf("dnsperf not found (%w): apt-get install -y dnsperf, or `go tool task bench`, which installs it", err)
		}
		c.dnsperf = p
	}

	dir, err := os.MkdirTemp("", "nxdnsbench-")
	if err != nil {
		return err
	}
	if c.keep {
		fmt.Fprintf(stderr, "work directory: %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	progress := func(format string, a ...any) {
		fmt.Fprintf(stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}

	if c.nxdnsd == "" {
		progress("building nxdnsd %s", c.rev)
		if c.nxdnsd, err = buildNxdnsd(ctx, dir, c.rev); err != nil {
			return err
		}
	}
	rep := report{machine: readMachine(ctx, c.nxdnsd), cfg: c}
	if c.rev != "" {
		rep.machine.Commit = command(ctx, "git", "rev-parse", "--short", c.rev)
	}
	if c.throughput {
		if rep.throughput, err = measureThroughput(ctx, c, dir, progress); err != nil {
			return err
		}
	}
	if c.bursts {
		for _, s := range scenarios {
			progress("fault burst: %s", s.Name)
			row, err := runBurst(ctx, c, dir, s)
			if err != nil {
				return fmt.Errorf("fault burst %s: %w", s.Name, err)
			}
			rep.bursts = append(rep.bursts, row)
		}
	}
	rep.machine.LoadEnd = loadAverage()
	rep.wall = time.Since(rep.machine.Started)

	text := rep.markdown()
	fmt.Fprint(stdout, text)
	if c.out != "" {
		if err := os.WriteFile(c.out, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// buildNxdnsd builds ./cmd/nxdnsd into dir, with symbols so that perf can
// name its functions: from the work tree of the module the current
// directory is in, or from git revision rev of it when rev is not "".
func buildNxdnsd(ctx context.Context, dir, rev string) (string, error) {
	gomod := command(ctx, "go", "env", "GOMOD")
	if gomod == "?" || gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the nxdnsd module: run from the repository or pass -nxdnsd")
	}
	src := filepath.Dir(gomod)
	if rev != "" {
		src = filepath.Join(dir, "src")
		if err := os.Mkdir(src, 0o755); err != nil {
			return "", err
		}
		archive := fmt.Sprintf("git -C %q archive --format=tar %q | tar -x -C %q", filepath.Dir(gomod), rev, src)
		if out, err := exec.CommandContext(ctx, "sh", "-c", archive).CombinedOutput(); err != nil {
			return "", fmt.Errorf("git archive %s: %w\n%s", rev, err, out)
		}
	}
	bin := filepath.Join(dir, "nxdnsd")
	// Default flags, as `task bench` compiles ahead (bench-build): the
	// build cache then serves every package and only the link is left.
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/nxdnsd")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/nxdnsd: %w\n%s", err, out)
	}
	return bin, nil
}

// throughput is the first half of the report: the same dnsperf load straight
// at a fake upstream (the ceiling) and through nxdnsd, then the load
// client's percentiles against both.
type throughput struct {
	ceiling, nxdnsd        *perfResult
	ceilFakeCPU, nxFakeCPU time.Duration // the in-process fakes' CPU time in each run
	ceilMachine, nxMachine cpuSplit      // the whole machine's CPU time in each run
	nxCPU                  time.Duration // nxdnsd's CPU time during its run
	peakRSS                int64         // nxdnsd's VmHWM right after its dnsperf run
	peakRSSAfter           int64         // ... and after the latency run too
	allocsPerQuery         float64       // nxdnsd's heap allocations per query answered under dnsperf, one scrape's left out; -1 unknown
	scrapeAllocs           int64         // what one /metrics scrape allocates in nxdnsd, measured idle; -1 unknown
	latCeiling, latNxdnsd  *load.Result  // nil when skipped
	fakeStats              fake.Stats    // the primary's counters over both dnsperf runs
	profile                string        // the perf record file, or ""
}

func measureThroughput(ctx context.Context, c runConfig, dir string, progress func(string, ...any)) (*throughput, error) {
	primary, secondary, err := startFakes(c, fake.Mode{})
	if err != nil {
		return nil, err
	}
	defer primary.Close()
	defer secondary.Close()
	conf, err := newDaemonConf(primary, secondary, 32)
	if err != nil {
		return nil, err
	}
	nx, err := startChild(ctx, c.nxdnsd, dir, "throughput", conf)
	if err != nil {
		return nil, err
	}
	defer nx.stop()

	progress("writing %d names", c.names)
	queries := filepath.Join(dir, "queries.txt")
	if err := writeQueryFile(queries, c.names); err != nil {
		return nil, err
	}

	t := &throughput{}
	progress("ceiling: dnsperf %s -> fake upstream %s", c.perf, primary.Addr())
	self, mc := selfCPUTime(), machineCPU()
	if t.ceiling, err = runDNSPerf(ctx, c.dnsperf, queries, primary.Addr(), c.perf); err != nil {
		return nil, err
	}
	t.ceilFakeCPU, t.ceilMachine = selfCPUTime()-self, machineCPU().sub(mc)

	progress("nxdnsd: dnsperf %s -> nxdnsd %s -> fake upstreams", c.perf, nx.addr)
	var rec *recording
	if c.perfRecord != "" {
		if rec, err = startRecording(ctx, nx.pid(), c.perf.Duration, c.perfRecord); err != nil {
			return nil, err
		}
		t.profile = c.perfRecord
	}
	// Two scrapes in a row while nxdnsd idles tell what one scrape
	// allocates, so that the per-query figure can leave it out.
	idle, idleOK := nx.mallocs(ctx)
	mallocs, mallocsOK := nx.mallocs(ctx)
	t.scrapeAllocs = -1
	if idleOK && mallocsOK {
		t.scrapeAllocs = int64(mallocs - idle)
	}
	self, mc = selfCPUTime(), machineCPU()
	nxCPU, _ := nx.cpuTime()
	t.nxdnsd, err = runDNSPerf(ctx, c.dnsperf, queries, nx.addr, c.perf)
	if rec != nil {
		if rerr := rec.wait(); rerr != nil {
			progress("perf record: %v", rerr)
			t.profile = ""
		}
	}
	if err != nil {
		return nil, err
	}
	t.nxFakeCPU, t.nxMachine = selfCPUTime()-self, machineCPU().sub(mc)
	t.fakeStats = primary.Stats()
	if after, err := nx.cpuTime(); err == nil {
		t.nxCPU = after - nxCPU
	}
	if t.peakRSS, err = nx.peakRSS(); err != nil {
		return nil, err
	}
	t.allocsPerQuery = -1
	if after, ok := nx.mallocs(ctx); ok && t.scrapeAllocs >= 0 && t.nxdnsd.Completed > 0 {
		t.allocsPerQuery = float64(int64(after-mallocs)-t.scrapeAllocs) / float64(t.nxdnsd.Completed)
	}

	if c.latency > 0 {
		lc := load.Config{InFlight: c.latencyInFlight, Duration: c.latency, Timeout: 2 * time.Second}
		progress("latency: load client, %d in flight for %v, fake then nxdnsd", lc.InFlight, lc.Duration)
		lc.Server, lc.Prefix = primary.Addr(), "c"
		if t.latCeiling, err = load.Run(ctx, lc); err != nil {
			return nil, err
		}
		lc.Server, lc.Prefix = nx.addr, "n"
		if t.latNxdnsd, err = load.Run(ctx, lc); err != nil {
			return nil, err
		}
	}
	t.peakRSSAfter, _ = nx.peakRSS()
	return t, nil
}

// startFakes starts the primary fake upstream in mode and an answering
// secondary.
func startFakes(c runConfig, mode fake.Mode) (primary, secondary *fake.Server, err error) {
	primary, err = fake.Start(fake.Config{Addr: "127.0.0.1:0", Mode: mode, Sockets: c.sockets})
	if err != nil {
		return nil, nil, err
	}
	secondary, err = fake.Start(fake.Config{Addr: "127.0.0.1:0", Sockets: c.sockets})
	if err != nil {
		_ = primary.Close()
		return nil, nil, err
	}
	return primary, secondary, nil
}

// newDaemonConf is the shipped configuration on free loopback ports, with
// the two fakes as its two upstreams; the primary has primarySlots slots,
// the secondary the shipped 32.
func newDaemonConf(primary, secondary *fake.Server, primarySlots int) (daemonConf, error) {
	listen, err := freePort()
	if err != nil {
		return daemonConf{}, err
	}
	admin, err := freePort()
	if err != nil {
		return daemonConf{}, err
	}
	return daemonConf{
		Listen: listen,
		Admin:  admin,
		Upstreams: []upstreamConf{
			{Name: "primary", Addr: primary.Addr(), Slots: primarySlots},
			{Name: "secondary", Addr: secondary.Addr(), Slots: 32},
		},
	}, nil
}

// recording is a perf record of one process running in the background.
type recording struct {
	cmd  *exec.Cmd
	errs strings.Builder
}

// startRecording samples pid's stacks with perf for d (cpu-clock, so that it
// works where hardware counters are not exposed).
func startRecording(ctx context.Context, pid int, d time.Duration, out string) (*recording, error) {
	r := &recording{}
	r.cmd = exec.CommandContext(ctx, "perf", "record", "-e", "cpu-clock", "-F", "999", "-g",
		"-p", fmt.Sprint(pid), "-o", out, "--", "sleep", fmt.Sprint(d.Seconds()))
	r.cmd.Stderr = &r.errs
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("perf record: %w", err)
	}
	return r, nil
}

func (r *recording) wait() error {
	if err := r.cmd.Wait(); err != nil {
		return fmt.Errorf("%w: %s", err, lastLines(r.errs.String(), 3))
	}
	return nil
}
