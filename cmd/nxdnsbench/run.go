package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
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
	against string // also the forwarding and hits rows side by side with nxdnsd built from this revision (against.go)
	dnsperf string
	perf    perfParams
	names   int

	latency         time.Duration // the load client's run per target
	latencyInFlight int

	throughput, bursts bool
	dot                bool          // also dnsperf through nxdnsd with DoT upstreams
	hits               bool          // also the cache-hit rows
	encrypted          bool          // also the DoT and DoH listener rows
	hitNames           int           // distinct names in the hits rows' query file
	forwardCache       bool          // the forwarding row with nxdnsd's cache on: the miss path
	blockRules         int           // the blocking rows' generated rules; 0: no blocking rows
	pairs              int           // runs at each side of a row measured side by side (pairs.go)
	history            bool          // the history rows: forwarding and hits with the query history on, in a file
	historyKnown       bool          // the binary has [history] (probeHistory): the other rows run with it off
	historyQPS         int           // the history rows' rate-limited forwarding row (dnsperf -Q); 0 skips it
	historyQPSLen      time.Duration // that row's dnsperf -l; 0: -l
	historyStore       string        // where the history rows keep it: storeSQLite (a file) or storePostgres

	peers peersConfig // the blocking run beside dnsmasq, Unbound and CoreDNS (peers_blocking.go)

	// dnsdist is whether dnsdist is measured beside nxdnsd; dnsdistBin its
	// binary, and dnsdistSkip why it is not measured when it is not.
	dnsdist     bool
	dnsdistBin  string
	dnsdistSkip string

	burstQueries  int
	burstInFlight int
	burstTimeout  time.Duration

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
	fs.StringVar(&c.against, "against", "", "with -throughput: the forwarding and hits rows again, side by side (-pairs) at an nxdnsd built from this git `revision` and the one under test: "+
		"a change to the query path judged beside the code it changed, in one run")
	fs.StringVar(&c.dnsperf, "dnsperf", "dnsperf", "dnsperf binary")
	fs.DurationVar(&c.perf.Duration, "l", 10*time.Second, "dnsperf -l: each throughput run's length")
	fs.IntVar(&c.perf.Clients, "c", 20, "dnsperf -c: clients")
	fs.IntVar(&c.perf.Outstanding, "q", 100, "dnsperf -q: queries outstanding")
	fs.IntVar(&c.perf.Threads, "T", 2, "dnsperf -T: threads")
	fs.IntVar(&c.names, "names", 1_000_000, "distinct names in dnsperf's query file")
	fs.DurationVar(&c.latency, "latency", 3*time.Second, "load-client run per target for latency percentiles (0 skips)")
	fs.IntVar(&c.latencyInFlight, "latency-inflight", 100, "load-client queries in flight for the percentiles")
	fs.BoolVar(&c.throughput, "throughput", true, "measure throughput and latency")
	fs.BoolVar(&c.dot, "dot", false, "with -throughput: one more dnsperf run, through nxdnsd with the fakes as DNS-over-TLS upstreams")
	fs.BoolVar(&c.hits, "hits", true, "with -throughput: the cache-hit rows, dnsperf with -hit-names names asked over and over: at the fake, through nxdnsd with its cache on, through dnsdist with a packet cache")
	fs.BoolVar(&c.encrypted, "encrypted", true, "with -throughput: the encrypted rows, dnsperf -m dot and -m doh with 100 connections and the hits rows' names, through nxdnsd's tls_listen/https_listen and dnsdist's addTLSLocal/addDOHLocal, caches on")
	fs.IntVar(&c.hitNames, "hit-names", 1000, "distinct names in the hits rows' query file")
	fs.BoolVar(&c.forwardCache, "forward-cache", false, "the forwarding row with nxdnsd's cache on, so that every query is a miss: the miss path's cost (a binary without a cache forwards as it is)")
	fs.IntVar(&c.blockRules, "block-rules", 0, "with -throughput: the blocking rows (issue 27): the forwarding and hits rows again with a generated list of this many rules in force, and a blocked-name row (every query blocked); 0 skips them")
	fs.BoolVar(&c.history, "history", false, "with -throughput: the history rows (issue 28): the forwarding and hits rows again with the query history on, in a file of the work directory, and its rows lost (nxdns_history_dropped_total); every other row runs with [history] enabled = false")
	fs.IntVar(&c.historyQPS, "history-qps", 20_000, "with -history: one more forwarding row with the history on, dnsperf -Q this many queries a second, which must lose no row (issue 28); 0 skips it")
	fs.DurationVar(&c.historyQPSLen, "history-qps-l", 0, "with -history: dnsperf -l of the -history-qps row (0: -l); issue 32 asks for 60s")
	fs.StringVar(&c.historyStore, "history-store", storeSQLite, "with -history: where the history rows keep it: sqlite (a file in the work directory) or postgres "+
		"(history.postgres: a throwaway PostgreSQL server on loopback started from Debian's postgresql package, fsync on, a database for each row; issue 32; "+
		"the rows' CPU per query includes the server's processes)")
	fs.BoolVar(&c.dnsdist, "dnsdist", true, "with -throughput: measure dnsdist beside nxdnsd, forwarding and hits (not installed: skipped with a note, unless this flag is given)")
	fs.StringVar(&c.dnsdistBin, "dnsdist-bin", "dnsdist", "dnsdist binary")
	fs.BoolVar(&c.bursts, "bursts", true, "run the four fault bursts")
	fs.IntVar(&c.burstQueries, "burst-queries", 2000, "queries per fault burst")
	fs.IntVar(&c.burstInFlight, "burst-inflight", 200, "queries in flight in a fault burst")
	fs.DurationVar(&c.burstTimeout, "burst-timeout", 5*time.Second, "client timeout in a fault burst")
	fs.IntVar(&c.sockets, "fake-sockets", 0, "UDP sockets per fake upstream (0: one per CPU)")
	fs.IntVar(&c.pairs, "pairs", 3, "with -block-rules, -history and -against: each blocking row, the history's forwarding and hits rows, and the rows against a base, measured side by side at an nxdnsd without the feature (or the base) and one with it, this many runs at each in turns; the ratio is the pairs' median")
	fs.StringVar(&c.out, "o", "", "also write the report (markdown) to this file")
	fs.StringVar(&c.perfRecord, "perf-record", "", "record `file` with perf (cpu-clock, call graphs) of nxdnsd during its dnsperf run")
	fs.BoolVar(&c.keep, "keep", false, "keep the work directory (configs, nxdnsd logs, query file)")
	addPeersFlags(fs, &c.peers)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("run: unexpected arguments %v", fs.Args())
	}
	if c.perf.Duration <= 0 || c.perf.Duration > 10*time.Minute || c.names < 1 || c.names > 10_000_000 ||
		c.hitNames < 1 || c.hitNames > 10_000_000 || c.blockRules < 0 || c.blockRules > 10_000_000 || c.pairs < 1 || c.pairs > 20 {
		return errors.New("run: want 0 < -l <= 10m, 1 <= -names <= 10,000,000, 1 <= -hit-names <= 10,000,000, 0 <= -block-rules <= 10,000,000 and 1 <= -pairs <= 20")
	}
	if c.historyStore != storeSQLite && c.historyStore != storePostgres {
		return fmt.Errorf("run: -history-store %q: want %s or %s", c.historyStore, storeSQLite, storePostgres)
	}
	if c.historyQPSLen < 0 || c.historyQPSLen > 10*time.Minute {
		return errors.New("run: want 0 <= -history-qps-l <= 10m")
	}
	if err := c.peers.validate(); err != nil {
		return err
	}
	if c.throughput {
		p, err := exec.LookPath(c.dnsperf)
		if err != nil {
			return fmt.Errorf("dnsperf not found (%w): apt-get install -y dnsperf, or `go tool task bench`, which installs it", err)
		}
		c.dnsperf = p
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	note, err := findDnsdist(&c, given["dnsdist"] || given["dnsdist-bin"])
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintln(stderr, note)
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
	if c.historyKnown, err = probeHistory(ctx, c.nxdnsd, dir); err != nil {
		return err
	}
	if c.history && !c.historyKnown {
		return errors.New("run: -history: this nxdnsd has no [history] table (nxdnsd -check refuses it)")
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
	rep.machine.ConntrackEnd = readConntrack()
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

// findDnsdist settles whether dnsdist is measured: with -throughput and
// -dnsdist, when it is installed (c.dnsdistBin resolved in PATH). Not
// installed, that is an error when -dnsdist or -dnsdist-bin was given on
// the command line (given), else dnsdist is skipped: c.dnsdistSkip says
// why, for the report, and note, for the terminal.
func findDnsdist(c *runConfig, given bool) (note string, err error) {
	switch {
	case !c.throughput:
		c.dnsdist = false
		return "", nil
	case !c.dnsdist:
		c.dnsdistSkip = "-dnsdist=false"
		return "", nil
	}
	p, err := exec.LookPath(c.dnsdistBin)
	if err == nil {
		c.dnsdistBin = p
		return "", nil
	}
	if given {
		return "", fmt.Errorf("dnsdist not found (%w): apt-get install -y dnsdist, or `go tool task bench`, which installs it", err)
	}
	c.dnsdist = false
	c.dnsdistSkip = fmt.Sprintf("dnsdist is not installed: no %s in PATH", c.dnsdistBin)
	return "note: " + c.dnsdistSkip + ": its rows are skipped. `go tool task bench` installs it; -dnsdist=false skips it without this note.", nil
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

// throughput is the first half of the report: the same dnsperf load
// straight at a fake upstream (the ceiling), through nxdnsd and through
// dnsdist, then the load client's percentiles against the fake and nxdnsd;
// with -dot, the dnsperf load once more through a second nxdnsd that
// forwards over DNS over TLS; with -hits, the cache-hit rows.
type throughput struct {
	ceiling               *fwdRun
	nx                    *fwdRun       // through nxdnsd, plain UDP upstreams, no cache
	dnsdist               *fwdRun       // through dnsdist, no cache; nil when skipped
	dnsdistVersion        string        // "dnsdist 1.7.3"; "" when skipped
	cache                 cacheProbe    // whether the nxdnsd under test has an answer cache
	peakRSSAfter          int64         // nxdnsd's VmHWM after the latency run too
	latCeiling, latNxdnsd *load.Result  // nil when skipped
	fakeStats             fake.Stats    // the primary's counters over the ceiling, nxdnsd and dnsdist runs
	profile               string        // the perf record file, or ""
	dot                   *dotRun       // nil unless -dot
	hits                  *hitsRuns     // nil unless -hits
	blocking              *blockingRuns // nil unless -block-rules
	enc                   *encRuns      // nil unless -encrypted
	history               *historyRuns  // nil unless -history
	against               *againstRuns  // nil unless -against
	peers                 *peersRuns    // nil unless -peers-blocking
}

// fwdRun is one dnsperf run and what it cost: straight at the primary fake
// (a ceiling), or through a forwarder, nxdnsd or dnsdist.
type fwdRun struct {
	ceiling        bool
	perf           *perfResult
	fakeCPU        time.Duration // the in-process fakes' CPU time (nxdnsbench's own)
	machine        cpuSplit      // the whole machine's CPU time
	cpu            time.Duration // the forwarder's user and system CPU time; a ceiling's: 0
	peakRSS        int64         // the forwarder's VmHWM right after the run
	allocsPerQuery float64       // nxdnsd's heap allocations per query answered, one scrape's left out; -1 unknown
	scrapeAllocs   int64         // what one /metrics scrape allocates in nxdnsd, measured idle; -1 unknown
	upstream       uint64        // queries the two fakes read during the run (dnsdist's health checks included)
}

// ownCPU is the CPU time of the process the row is about: the forwarder's,
// or for a ceiling the fake's.
func (r *fwdRun) ownCPU() time.Duration {
	if r.ceiling {
		return r.fakeCPU
	}
	return r.cpu
}

// cpuPerQuery is ownCPU over the queries dnsperf completed, in µs; ok is
// false when none completed or the CPU time could not be read.
func (r *fwdRun) cpuPerQuery() (us float64, ok bool) {
	cpu := r.ownCPU()
	if r.perf.Completed == 0 || cpu <= 0 {
		return 0, false
	}
	return perQueryUS(cpu, r.perf.Completed), true
}

func perQueryUS(cpu time.Duration, completed int) float64 {
	return float64(cpu) / float64(time.Microsecond) / float64(completed)
}

// hitsRuns are the cache-hit rows: dnsperf with a small query file asked
// over and over, at the fake and through each forwarder with its cache on,
// measured back to back.
type hitsRuns struct {
	ceiling *fwdRun // nil when neither forwarder is measured: nothing to compare
	nx      *fwdRun // nil when the nxdnsd under test has no cache
	dnsdist *fwdRun // nil when dnsdist is skipped
}

// dotRun is the -dot pass: dnsperf over UDP to an nxdnsd of its own whose
// two upstreams are the same fakes over DNS over TLS.
type dotRun struct {
	*fwdRun
	fakeStats fake.Stats    // the primary's counters over this run alone
	wall      time.Duration // the whole pass: nxdnsd's start, the run, its stop
}

// caLifetime is how long the run's throwaway CA and the fakes' certificate
// are valid: longer than any run (seven dnsperf runs of at most 10 min, a
// latency run), short enough to be worthless afterwards.
const caLifetime = 6 * time.Hour

// enabled returns cache.enabled for a configuration: nil (no [cache]
// table) when the binary has no cache.
func (p cacheProbe) enabled(on bool) *bool {
	if !p.Has {
		return nil
	}
	return &on
}

func measureThroughput(ctx context.Context, c runConfig, dir string, progress func(string, ...any)) (*throughput, error) {
	var serverTLS *tls.Config
	caFile := ""
	if c.dot {
		var err error
		if serverTLS, caFile, err = newTestCA(dir); err != nil {
			return nil, err
		}
	}
	primary, secondary, err := startFakes(c, fake.Mode{}, serverTLS)
	if err != nil {
		return nil, err
	}
	defer primary.Close()
	defer secondary.Close()
	upstream := func() uint64 { return primary.Stats().Queries + secondary.Stats().Queries }

	t := &throughput{}
	if t.cache, err = probeCache(ctx, c.nxdnsd, dir); err != nil {
		return nil, err
	}
	if !t.cache.Has {
		progress("nxdnsd has no answer cache: -check refuses [cache] (%s)", t.cache.Refusal)
	}
	conf, err := c.nxdnsdConf(primary, secondary, 32, "")
	if err != nil {
		return nil, err
	}
	conf.Cache = t.cache.enabled(c.forwardCache) // this row measures forwarding: off, or every query a miss
	nx, err := startChild(ctx, c.nxdnsd, dir, "throughput", conf)
	if err != nil {
		return nil, err
	}
	defer nx.stop()

	progress("writing %d names", c.names)
	queries := filepath.Join(dir, "queries.txt")
	if err := writeQueryFile(queries, "q", c.names); err != nil {
		return nil, err
	}

	progress("ceiling: dnsperf %s -> fake upstream %s", c.perf, primary.Addr())
	if t.ceiling, err = measure(ctx, c, nil, primary.Addr(), queries, upstream, nil); err != nil {
		return nil, err
	}

	progress("nxdnsd: dnsperf %s -> nxdnsd %s -> fake upstreams", c.perf, nx.addr)
	var rec *recording
	if c.perfRecord != "" {
		if rec, err = startRecording(ctx, nx.pid(), c.perf.Duration, c.perfRecord); err != nil {
			return nil, err
		}
		t.profile = c.perfRecord
	}
	t.nx, err = measure(ctx, c, nx, nx.addr, queries, upstream, func() {
		if rec == nil {
			return
		}
		if rerr := rec.wait(); rerr != nil {
			progress("perf record: %v", rerr)
			t.profile = ""
		}
	})
	if err != nil {
		return nil, err
	}

	if c.dnsdist {
		// Started only now: idle, it would still send its health checks
		// to the fakes (two a second) and run its threads during the
		// other runs.
		t.dnsdistVersion = dnsdistVersion(ctx, c.dnsdistBin)
		if t.dnsdist, err = dnsdistRun(ctx, c, dir, "dnsdist", 0, primary, secondary, queries, upstream, progress); err != nil {
			return nil, err
		}
	}
	t.fakeStats = primary.Stats()

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
	nx.stop() // done with: the DoT nxdnsd and the hits runs' forwarders run alone

	if c.dot {
		if t.dot, err = measureDoT(ctx, c, dir, queries, caFile, t.cache, primary, secondary, upstream, progress); err != nil {
			return nil, err
		}
	}
	switch {
	case c.hits && !t.cache.Has && !c.dnsdist:
		t.hits = &hitsRuns{} // nothing to measure against a ceiling: no run
	case c.hits:
		if t.hits, err = measureHits(ctx, c, dir, t.cache, primary, secondary, upstream, progress); err != nil {
			return nil, err
		}
	}
	if c.blockRules > 0 {
		if t.blocking, err = measureBlocking(ctx, c, dir, t, primary, secondary, upstream, progress); err != nil {
			return nil, err
		}
	}
	if c.encrypted {
		if t.enc, err = measureEncrypted(ctx, c, dir, t.cache, primary, secondary, upstream, progress); err != nil {
			return nil, err
		}
	}
	if c.history {
		if t.history, err = measureHistory(ctx, c, dir, t, primary, secondary, upstream, progress); err != nil {
			return nil, err
		}
	}
	if c.against != "" {
		if t.against, err = measureAgainst(ctx, c, dir, t, primary, secondary, upstream, progress); err != nil {
			return nil, err
		}
	}
	if c.peers.names > 0 {
		if t.peers, err = measurePeersBlocking(ctx, c, dir, t.cache, primary, secondary, upstream, progress); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// measureHits is the cache-hit rows: a query file of c.hitNames names that
// dnsperf asks over and over, straight at the primary fake (the rows'
// ceiling), then through an nxdnsd with its cache on (when it has one) and
// through dnsdist with a packet cache (unless skipped), back to back.
func measureHits(ctx context.Context, c runConfig, dir string, cache cacheProbe, primary, secondary *fake.Server,
	upstream func() uint64, progress func(string, ...any)) (*hitsRuns, error) {
	queries := filepath.Join(dir, "hits.txt")
	if err := writeQueryFile(queries, "h", c.hitNames); err != nil {
		return nil, err
	}
	var nx *child
	if cache.Has {
		conf, err := c.nxdnsdConf(primary, secondary, 32, "")
		if err != nil {
			return nil, err
		}
		conf.Cache = cache.enabled(true)
		if nx, err = startChild(ctx, c.nxdnsd, dir, "hits", conf); err != nil {
			return nil, err
		}
		defer nx.stop()
	}

	h := &hitsRuns{}
	var err error
	progress("hits ceiling: dnsperf %s, %d names over and over -> fake upstream %s", c.perf, c.hitNames, primary.Addr())
	if h.ceiling, err = measure(ctx, c, nil, primary.Addr(), queries, upstream, nil); err != nil {
		return nil, err
	}
	if nx != nil {
		progress("hits: dnsperf %s -> nxdnsd %s, cache on -> fake upstreams", c.perf, nx.addr)
		if h.nx, err = measure(ctx, c, nx, nx.addr, queries, upstream, nil); err != nil {
			return nil, err
		}
		nx.stop()
	}
	if c.dnsdist {
		if h.dnsdist, err = dnsdistRun(ctx, c, dir, "dnsdist-hits", packetCacheEntries, primary, secondary, queries, upstream, progress); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// dnsdistRun starts dnsdist (NAME.lua in dir) with the fakes as its
// backends and a packet cache of cacheEntries (0: none), runs dnsperf
// through it and stops it.
func dnsdistRun(ctx context.Context, c runConfig, dir, name string, cacheEntries int, primary, secondary *fake.Server,
	queries string, upstream func() uint64, progress func(string, ...any)) (*fwdRun, error) {
	conf, err := newDnsdistConf(primary.Addr(), secondary.Addr(), cacheEntries)
	if err != nil {
		return nil, err
	}
	dd, err := startDnsdist(ctx, c.dnsdistBin, dir, name, conf)
	if err != nil {
		return nil, err
	}
	defer dd.stop()
	what := "no cache"
	if cacheEntries > 0 {
		what = fmt.Sprintf("packet cache of %d", cacheEntries)
	}
	progress("%s: dnsperf %s -> dnsdist %s, %s -> fake upstreams", name, c.perf, dd.addr, what)
	return measure(ctx, c, dd, dd.addr, queries, upstream, nil)
}

// measure runs dnsperf at addr and measures what it cost the machine and,
// when target is not nil, the forwarder target listening there; target nil
// makes the run a ceiling, addr a fake's. upstream counts the queries the
// fakes have read so far. done, if not nil, is called as soon as dnsperf
// has ended, before anything else is read.
func measure(ctx context.Context, c runConfig, target *child, addr netip.AddrPort, queries string,
	upstream func() uint64, done func()) (*fwdRun, error) {
	r := &fwdRun{ceiling: target == nil, scrapeAllocs: -1, allocsPerQuery: -1}
	var mallocs uint64
	if target != nil {
		// Two scrapes in a row while nxdnsd idles tell what one scrape
		// allocates, so that the per-query figure can leave it out.
		idle, idleOK := target.mallocs(ctx)
		var ok bool
		if mallocs, ok = target.mallocs(ctx); idleOK && ok {
			r.scrapeAllocs = int64(mallocs - idle)
		}
	}
	up := upstream()
	self, mc := selfCPUTime(), machineCPU()
	var cpu time.Duration
	if target != nil {
		cpu, _ = target.cpuTime()
	}
	var err error
	r.perf, err = runDNSPerf(ctx, c.dnsperf, queries, addr, c.perf)
	if done != nil {
		done()
	}
	if err != nil {
		return nil, err
	}
	r.fakeCPU, r.machine = selfCPUTime()-self, machineCPU().sub(mc)
	r.upstream = upstream() - up
	if target == nil {
		return r, nil
	}
	select {
	case <-target.exited:
		return nil, fmt.Errorf("%s exited during the run: %v (log %s)", target.name, target.err, target.log)
	default:
	}
	if after, err := target.cpuTime(); err == nil {
		r.cpu = after - cpu
	}
	if r.peakRSS, err = target.peakRSS(); err != nil {
		return nil, err
	}
	if after, ok := target.mallocs(ctx); ok && r.scrapeAllocs >= 0 && r.perf.Completed > 0 {
		r.allocsPerQuery = float64(int64(after-mallocs)-r.scrapeAllocs) / float64(r.perf.Completed)
	}
	return r, nil
}

// measureDoT is the -dot pass: a fresh nxdnsd with the shipped upstream
// settings but the fakes' DoT listeners as its upstreams, trusting caFile,
// its cache off as for the UDP row, and the same dnsperf run through it.
func measureDoT(ctx context.Context, c runConfig, dir, queries, caFile string, cache cacheProbe, primary, secondary *fake.Server,
	upstream func() uint64, progress func(string, ...any)) (*dotRun, error) {
	start := time.Now()
	conf, err := c.nxdnsdConf(primary, secondary, 32, caFile)
	if err != nil {
		return nil, err
	}
	conf.Cache = cache.enabled(false)
	nx, err := startChild(ctx, c.nxdnsd, dir, "throughput-dot", conf)
	if err != nil {
		return nil, err
	}
	defer nx.stop()
	progress("DoT: dnsperf %s -> nxdnsd %s -> fake upstreams over DNS over TLS (%s, %s)",
		c.perf, nx.addr, primary.TLSAddr(), secondary.TLSAddr())
	before := primary.Stats()
	r, err := measure(ctx, c, nx, nx.addr, queries, upstream, nil)
	if err != nil {
		return nil, err
	}
	d := &dotRun{fwdRun: r, fakeStats: primary.Stats().Sub(before)}
	nx.stop()
	d.wall = time.Since(start)
	return d, nil
}

// newTestCA makes the run's throwaway CA, writes its certificate to
// dir/ca.pem for nxdnsd's ca_file and returns the fakes' server
// configuration: a certificate for fake.TLSName and 127.0.0.1.
func newTestCA(dir string) (*tls.Config, string, error) {
	ca, err := fake.NewCA(caLifetime)
	if err != nil {
		return nil, "", err
	}
	conf, err := ca.ServerConfig(fake.TLSName, "127.0.0.1")
	if err != nil {
		return nil, "", err
	}
	path, err := filepath.Abs(filepath.Join(dir, "ca.pem"))
	if err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(path, ca.PEM(), 0o644); err != nil {
		return nil, "", err
	}
	return conf, path, nil
}

// startFakes starts the primary fake upstream in mode and an answering
// secondary, both serving DoT as well with serverTLS when it is not nil.
func startFakes(c runConfig, mode fake.Mode, serverTLS *tls.Config) (primary, secondary *fake.Server, err error) {
	primary, err = fake.Start(fake.Config{Addr: "127.0.0.1:0", Mode: mode, Sockets: c.sockets, TLS: serverTLS})
	if err != nil {
		return nil, nil, err
	}
	secondary, err = fake.Start(fake.Config{Addr: "127.0.0.1:0", Sockets: c.sockets, TLS: serverTLS})
	if err != nil {
		_ = primary.Close()
		return nil, nil, err
	}
	return primary, secondary, nil
}

// newDaemonConf is the shipped configuration on free loopback ports, with
// the two fakes as its two upstreams; the primary has primarySlots slots,
// the secondary the shipped 32. They are plain UDP upstreams when caFile is
// "", else the fakes' DoT listeners verified with the CA in caFile (the
// fakes must have been started with Config.TLS).
// nxdnsdConf is newDaemonConf with the query history off when the binary
// has one: the rows measure what they always did.
func (c runConfig) nxdnsdConf(primary, secondary *fake.Server, primarySlots int, caFile string) (daemonConf, error) {
	conf, err := newDaemonConf(primary, secondary, primarySlots, caFile)
	conf.HistoryOff = c.historyKnown
	return conf, err
}

func newDaemonConf(primary, secondary *fake.Server, primarySlots int, caFile string) (daemonConf, error) {
	pa, sa := primary.Addr(), secondary.Addr()
	if caFile != "" {
		pa, sa = primary.TLSAddr(), secondary.TLSAddr()
		if !pa.IsValid() || !sa.IsValid() {
			return daemonConf{}, errors.New("DoT upstreams: a fake serves no DNS over TLS")
		}
	}
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
			{Name: "primary", Addr: pa, Slots: primarySlots, CAFile: caFile},
			{Name: "secondary", Addr: sa, Slots: 32, CAFile: caFile},
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
