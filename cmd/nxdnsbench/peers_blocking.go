package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/fake"
)

// The blocking run beside dnsmasq, Unbound and CoreDNS (issue 33): the
// same generated names blocked in every server, each in its own format
// (peers_conf.go), and for each server: its RSS answering without the list
// and at its first blocked answer with it, the time from its start to that
// answer, and three dnsperf rows, each beside its same-run ceiling:
//
//	(a) blocked: the list's names, every query blocked (caches as deployed: on)
//	(b) hits: the hits rows' names over and over, caches on
//	(c) forwarding: the throughput rows' million names, caches off
//
// nxdnsd runs twice, with its history off and on (SQLite). dnsdist has no
// list format and is not in this run.

// peersConfig is `nxdnsbench run`'s flags for the blocking run.
type peersConfig struct {
	names       int // generated names blocked; 0 skips the run
	dnsmasq     string
	unbound     string
	coredns     string // "" builds corednsVersion once into the user cache directory
	history     bool   // nxdnsd once more with [history] on
	loadTimeout time.Duration
	rounds      int // (a), (b) and (c) measured this many times, each server in turn; the median run reported
}

// addPeersFlags registers the blocking run's flags on fs.
func addPeersFlags(fs *flag.FlagSet, p *peersConfig) {
	fs.IntVar(&p.names, "peers-blocking", 1_000_000, "with -throughput: the blocking run beside dnsmasq, Unbound and CoreDNS (issue 33), "+
		"this many generated names blocked in each (nxdnsd: a hosts list); 0 skips it")
	fs.StringVar(&p.dnsmasq, "dnsmasq-bin", "dnsmasq", "dnsmasq binary for the blocking run (not installed: its rows are skipped)")
	fs.StringVar(&p.unbound, "unbound-bin", "unbound", "Unbound binary for the blocking run; unbound-checkconf is looked for beside it")
	fs.StringVar(&p.coredns, "coredns-bin", "", "CoreDNS binary for the blocking run (default: CoreDNS "+corednsVersion[1:]+
		" built once with go build in a temporary module, kept in the user cache directory)")
	fs.BoolVar(&p.history, "peers-history", true, "with -peers-blocking: nxdnsd once more with its history on (SQLite)")
	fs.DurationVar(&p.loadTimeout, "peers-load-timeout", 5*time.Minute, "with -peers-blocking: how long a server may take from its start to its first blocked answer")
	fs.IntVar(&p.rounds, "peers-rounds", 3, "with -peers-blocking: rounds of (c), (b) and (a), each server started afresh with the list in turn, "+
		"so that a slow spell of the machine falls on every server alike; each row reports its median run by QPS")
}

func (p peersConfig) validate() error {
	if p.names < 0 || p.names > 10_000_000 || p.loadTimeout <= 0 || p.loadTimeout > time.Hour {
		return errors.New("run: want 0 <= -peers-blocking <= 10,000,000 and 0 < -peers-load-timeout <= 1h")
	}
	if p.rounds < 1 || p.rounds > 20 {
		return errors.New("run: want 1 <= -peers-rounds <= 20")
	}
	return nil
}

// loadPoll is the wait between the polls for the first blocked answer;
// each poll waits readyPoll for its answer.
const loadPoll = 10 * time.Millisecond

// historyOffBound is the bound on the history's cost: with it on,
// the hits and forwarding rows within 10 % of the same rows with it off.
const historyOffBound = 0.10

// peerRow is one server's figures in the blocking run.
type peerRow struct {
	name    string
	history bool   // nxdnsd with its history on
	skip    string // why it was not measured, or why a part is missing

	rssBefore int64         // VmRSS answering, no list configured
	rssList   int64         // VmRSS at the first blocked answer
	hwmList   int64         // VmHWM then: the list's load at its peak
	load      time.Duration // from its start to its first blocked answer
	blocked   *fwdRun       // (a): the median of blockedRuns
	hits      *fwdRun       // (b): the median of hitsRuns
	fwd       *fwdRun       // (c): the median of fwdRuns

	blockedRuns, hitsRuns, fwdRuns []*fwdRun // a run a round

	historyRows float64 // nxdns_history_rows_total after the rows; -1 not served
}

// peersRuns is the blocking run: its ceilings and a row per server.
type peersRuns struct {
	names                          int
	ceilBlocked, ceilHits, ceilFwd *fwdRun
	rows                           []*peerRow
}

// launch is one start of a server: its command, its DNS address and, for
// nxdnsd, its admin endpoint.
type launch struct {
	cmd         *exec.Cmd
	addr, admin netip.AddrPort
}

// blockPeer is one server of the blocking run. prepare writes its
// configuration for one phase (tag) — with the list or not, its cache on
// or off — into the work directory, has it checked where the server has a
// checker, and returns the command that starts it.
type blockPeer struct {
	name    string
	slug    string // in file names
	history bool
	skip    string // not measured at all: why
	prepare func(ctx context.Context, tag string, list, cache bool) (launch, error)
}

// peersEnv is what every server of the run shares.
type peersEnv struct {
	c                  runConfig
	dir                string
	lists              peerLists
	primary, secondary *fake.Server
	cache              cacheProbe
	upstream           func() uint64
	progress           func(string, ...any)
}

// measurePeersBlocking is the blocking run, after the other throughput
// rows, against the same fakes: the lists, the three ceilings, then each
// server in turn, alone on the machine but for dnsperf and the fakes.
func measurePeersBlocking(ctx context.Context, c runConfig, dir string, cache cacheProbe, primary, secondary *fake.Server,
	upstream func() uint64, progress func(string, ...any)) (*peersRuns, error) {
	progress("blocking run: writing %d names in each server's format", c.peers.names)
	lists, err := writePeerLists(dir, c.peers.names)
	if err != nil {
		return nil, err
	}
	e := &peersEnv{c: c, dir: dir, lists: lists, primary: primary, secondary: secondary, cache: cache, upstream: upstream, progress: progress}
	fwdQueries := filepath.Join(dir, "queries.txt") // the throughput rows' names, written by measureThroughput
	hitsQueries := filepath.Join(dir, "peers-hits.txt")
	if err := writeQueryFile(hitsQueries, "h", c.hitNames); err != nil {
		return nil, err
	}

	pr := &peersRuns{names: lists.names}
	for _, x := range []struct {
		what, file string
		dst        **fwdRun
	}{{"blocked names", lists.queries, &pr.ceilBlocked}, {"hits", hitsQueries, &pr.ceilHits}, {"forwarding", fwdQueries, &pr.ceilFwd}} {
		progress("blocking run, %s ceiling: dnsperf %s -> fake upstream %s", x.what, c.perf, primary.Addr())
		if *x.dst, err = measure(ctx, c, nil, primary.Addr(), x.file, upstream, nil); err != nil {
			return nil, err
		}
	}
	peers := e.peers(ctx)
	for _, p := range peers {
		row := &peerRow{name: p.name, history: p.history, skip: p.skip, historyRows: -1}
		pr.rows = append(pr.rows, row)
		if p.skip != "" {
			progress("blocking run: %s not measured: %s", p.name, p.skip)
			continue
		}
		if err := e.measurePeer(ctx, p, row, fwdQueries, hitsQueries); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			row.skip = err.Error()
			progress("blocking run: %s: %v", p.name, err)
		}
	}
	// The later rounds of (c), (b) and (a), the servers in the same order:
	// one server's runs are minutes apart, as the others' are.
	for round := 2; round <= c.peers.rounds; round++ {
		for i, p := range peers {
			row := pr.rows[i]
			if row.skip != "" {
				continue
			}
			progress("blocking run, round %d of %d: %s", round, c.peers.rounds, p.name)
			if err := e.measureRound(ctx, p, row, fwdQueries, hitsQueries, false); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				row.skip = err.Error()
				progress("blocking run: %s: %v", p.name, err)
			}
		}
	}
	for _, row := range pr.rows {
		row.settle()
	}
	return pr, nil
}

// settle sets (a), (b) and (c) to their rounds' runs of median QPS; a
// row that failed in any round shows none of them.
func (row *peerRow) settle() {
	if row.skip != "" || len(row.hitsRuns) == 0 || len(row.blockedRuns) == 0 || len(row.fwdRuns) == 0 {
		row.hits, row.blocked, row.fwd = nil, nil, nil
		return
	}
	row.hits, row.blocked, row.fwd = medianRun(row.hitsRuns), medianRun(row.blockedRuns), medianRun(row.fwdRuns)
}

// peers are the run's servers in the table's order: nxdnsd, nxdnsd with
// its history on, dnsmasq, Unbound, CoreDNS; each that is missing says why.
func (e *peersEnv) peers(ctx context.Context) []blockPeer {
	ps := []blockPeer{e.nxdnsdPeer("nxdnsd", "nxdnsd", false)}
	switch {
	case e.c.peers.history && e.c.historyKnown:
		ps = append(ps, e.nxdnsdPeer("nxdnsd, history on (SQLite)", "nxdnsd-history", true))
	case e.c.peers.history:
		ps = append(ps, blockPeer{name: "nxdnsd, history on (SQLite)", history: true,
			skip: "this nxdnsd has no query history (-check refuses [history])"})
	}
	ps = append(ps, e.dnsmasqPeer(ctx), e.unboundPeer(ctx), e.corednsPeer(ctx))
	return ps
}

func (e *peersEnv) nxdnsdPeer(name, slug string, history bool) blockPeer {
	return blockPeer{name: name, slug: slug, history: history, prepare: func(ctx context.Context, tag string, list, cache bool) (launch, error) {
		conf, err := newDaemonConf(e.primary, e.secondary, 32, "")
		if err != nil {
			return launch{}, err
		}
		conf.Cache = e.cache.enabled(cache)
		if list {
			conf.BlockList = e.lists.hosts
		}
		conf.HistoryOff = e.c.historyKnown
		if history {
			if conf.HistoryPath, err = filepath.Abs(filepath.Join(e.dir, slug+"-"+tag+".db")); err != nil {
				return launch{}, err
			}
		}
		path := filepath.Join(e.dir, slug+"-"+tag+".toml")
		if err := os.WriteFile(path, []byte(conf.toml()), 0o644); err != nil {
			return launch{}, err
		}
		if err := checkConf(ctx, e.c.nxdnsd, path); err != nil {
			return launch{}, err
		}
		return launch{cmd: exec.Command(e.c.nxdnsd, "-c", path), addr: conf.Listen, admin: conf.Admin}, nil
	}}
}

func (e *peersEnv) dnsmasqPeer(ctx context.Context) blockPeer {
	p := blockPeer{name: "dnsmasq", slug: "dnsmasq"}
	bin, err := lookPeer(e.c.peers.dnsmasq)
	if err != nil {
		p.skip = fmt.Sprintf("not installed: no %s in PATH (`go tool task bench` installs it)", e.c.peers.dnsmasq)
		return p
	}
	p.name = peerVersion("dnsmasq", command(ctx, bin, "--version"))
	p.prepare = func(ctx context.Context, tag string, list, cache bool) (launch, error) {
		listen, err := freePort()
		if err != nil {
			return launch{}, err
		}
		conf := dnsmasqConf{Listen: listen, Servers: []netip.AddrPort{e.primary.Addr(), e.secondary.Addr()}}
		if cache {
			conf.Cache = peerHitsCache
		}
		if list {
			conf.List = e.lists.dnsmasq
		}
		path, err := filepath.Abs(filepath.Join(e.dir, "dnsmasq-"+tag+".conf"))
		if err != nil {
			return launch{}, err
		}
		if err := os.WriteFile(path, []byte(conf.text()), 0o644); err != nil {
			return launch{}, err
		}
		if err := checkPeerConf(ctx, e.c.peers.loadTimeout, bin, "--test", "-C", path); err != nil {
			return launch{}, err
		}
		return launch{cmd: exec.Command(bin, "-k", "--log-facility=-", "-C", path), addr: listen}, nil
	}
	return p
}

func (e *peersEnv) unboundPeer(ctx context.Context) blockPeer {
	p := blockPeer{name: "Unbound", slug: "unbound"}
	bin, err := lookPeer(e.c.peers.unbound)
	if err != nil {
		p.skip = fmt.Sprintf("not installed: no %s in PATH (`go tool task bench` installs it)", e.c.peers.unbound)
		return p
	}
	checker := filepath.Join(filepath.Dir(bin), "unbound-checkconf")
	if _, err := os.Stat(checker); err != nil {
		p.skip = fmt.Sprintf("no unbound-checkconf beside %s", bin)
		return p
	}
	p.name = peerVersion("Unbound", command(ctx, bin, "-V"))
	p.prepare = func(ctx context.Context, tag string, list, cache bool) (launch, error) {
		listen, err := freePort()
		if err != nil {
			return launch{}, err
		}
		dir, err := filepath.Abs(e.dir)
		if err != nil {
			return launch{}, err
		}
		conf := unboundConf{Listen: listen, Forwards: []netip.AddrPort{e.primary.Addr(), e.secondary.Addr()},
			Cache: cache, Directory: dir, Threads: runtime.NumCPU()}
		if list {
			conf.List = e.lists.unbound
		}
		path := filepath.Join(dir, "unbound-"+tag+".conf")
		if err := os.WriteFile(path, []byte(conf.text()), 0o644); err != nil {
			return launch{}, err
		}
		if err := checkPeerConf(ctx, e.c.peers.loadTimeout, checker, path); err != nil {
			return launch{}, err
		}
		return launch{cmd: exec.Command(bin, "-d", "-c", path), addr: listen}, nil
	}
	return p
}

func (e *peersEnv) corednsPeer(ctx context.Context) blockPeer {
	p := blockPeer{name: "CoreDNS", slug: "coredns"}
	bin, err := findCoreDNS(ctx, e.c.peers.coredns, e.progress)
	if err != nil {
		p.skip = err.Error()
		return p
	}
	p.name = peerVersion("CoreDNS", command(ctx, bin, "-version"))
	p.prepare = func(ctx context.Context, tag string, list, cache bool) (launch, error) {
		listen, err := freePort()
		if err != nil {
			return launch{}, err
		}
		conf := corednsConf{Listen: listen, Forwards: []netip.AddrPort{e.primary.Addr(), e.secondary.Addr()}, Cache: cache}
		if list {
			conf.Hosts = e.lists.hosts
		}
		path, err := filepath.Abs(filepath.Join(e.dir, "coredns-"+tag+".Corefile"))
		if err != nil {
			return launch{}, err
		}
		if err := os.WriteFile(path, []byte(conf.corefile()), 0o644); err != nil {
			return launch{}, err
		}
		return launch{cmd: exec.Command(bin, "-conf", path), addr: listen}, nil
	}
	return p
}

// lookPeer finds a peer's binary in PATH or, for a bare name, in
// /usr/sbin, where Debian installs dnsmasq and Unbound and which a user's
// PATH may lack.
func lookPeer(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil || strings.Contains(name, "/") {
		return p, err
	}
	if p, err2 := exec.LookPath(filepath.Join("/usr/sbin", name)); err2 == nil {
		return p, nil
	}
	return "", err
}

// start prepares and starts p for one phase without waiting for it; it
// returns when the process was started.
func (e *peersEnv) start(ctx context.Context, p blockPeer, tag string, list, cache bool) (*child, time.Time, error) {
	l, err := p.prepare(ctx, tag, list, cache)
	if err != nil {
		return nil, time.Time{}, err
	}
	started := time.Now()
	ch, err := startProcess(p.name+" "+tag, l.cmd, filepath.Join(e.dir, p.slug+"-"+tag+".log"), l.addr, l.admin)
	return ch, started, err
}

// measurePeer fills row: three starts of p, each stopped before the next.
// Without the list, its RSS once it forwards; with the list and its caches
// off, the time to its first blocked answer, its RSS then, and the
// forwarding row; with the list and its caches on, the hits and blocked
// rows.
func (e *peersEnv) measurePeer(ctx context.Context, p blockPeer, row *peerRow, fwdQueries, hitsQueries string) error {
	e.progress("blocking run: %s without the list", p.name)
	ch, _, err := e.start(ctx, p, "nolist", false, true)
	if err != nil {
		return err
	}
	err = ch.waitReady(ctx, readyForwarded)
	if err == nil {
		row.rssBefore, err = procStatusBytes(ch.pid(), "VmRSS")
	}
	ch.stop()
	if err != nil {
		return childFailed(ch, err)
	}
	e.progress("blocking run: %s with %s names, caches off: loading", p.name, thousands(float64(e.lists.names)))
	return e.measureRound(ctx, p, row, fwdQueries, hitsQueries, true)
}

// measureRound is a round of p: (c) at a fresh start with the list and
// its caches off (in the first round, the load time and the RSS at the
// first blocked answer recorded there too), then (b) and (a) at another
// with them on.
func (e *peersEnv) measureRound(ctx context.Context, p blockPeer, row *peerRow, fwdQueries, hitsQueries string, first bool) error {
	loadOf := row
	if !first {
		loadOf = nil
	}
	ch, err := e.startLoaded(ctx, p, "forwarding", false, loadOf)
	if err != nil {
		return err
	}
	if first {
		e.progress("blocking run: %s loaded in %v", p.name, row.load.Round(time.Millisecond))
	}
	e.progress("blocking run: %s forwarding: dnsperf %s -> %s", p.name, e.c.perf, ch.addr)
	fwd, err := measure(ctx, e.c, ch, ch.addr, fwdQueries, e.upstream, nil)
	ch.stop()
	if err != nil {
		return childFailed(ch, err)
	}
	row.fwdRuns = append(row.fwdRuns, fwd)
	return e.measureCached(ctx, p, row, hitsQueries)
}

// childFailed is err with ch's name and the last lines of its log.
func childFailed(ch *child, err error) error {
	b, _ := os.ReadFile(ch.log)
	return fmt.Errorf("%s: %w (log %s: %s)", ch.name, err, ch.log, lastLines(string(b), 3))
}

// measureCached starts p afresh with the list and its caches on and adds
// a run of (b), then of (a), to row.
func (e *peersEnv) measureCached(ctx context.Context, p blockPeer, row *peerRow, hitsQueries string) error {
	e.progress("blocking run: %s with the list, caches on", p.name)
	ch, err := e.startLoaded(ctx, p, "hits", true, nil)
	if err != nil {
		return err
	}
	defer ch.stop()
	e.progress("blocking run: %s hits: dnsperf %s -> %s", p.name, e.c.perf, ch.addr)
	hits, err := measure(ctx, e.c, ch, ch.addr, hitsQueries, e.upstream, nil)
	if err != nil {
		return childFailed(ch, err)
	}
	e.progress("blocking run: %s blocked names: dnsperf %s -> %s", p.name, e.c.perf, ch.addr)
	blocked, err := measure(ctx, e.c, ch, ch.addr, e.lists.queries, e.upstream, nil)
	if err != nil {
		return childFailed(ch, err)
	}
	row.hitsRuns, row.blockedRuns = append(row.hitsRuns, hits), append(row.blockedRuns, blocked)
	if p.history {
		if v, ok := scrapeMetric(ctx, ch.admin, "nxdns_history_rows_total"); ok {
			row.historyRows = max(row.historyRows, 0) + v
		}
	}
	return nil
}

// startLoaded starts p with the list and waits for its first blocked
// answer, then for a forwarded one; with row not nil, it records the load
// time and the RSS at the first blocked answer there.
func (e *peersEnv) startLoaded(ctx context.Context, p blockPeer, tag string, cache bool, row *peerRow) (*child, error) {
	ch, started, err := e.start(ctx, p, tag, true, cache)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*child, error) {
		ch.stop()
		return nil, childFailed(ch, err)
	}
	load, err := waitBlocked(ctx, ch, e.lists.first, started, e.c.peers.loadTimeout)
	if err != nil {
		return fail(err)
	}
	if row != nil {
		row.load = load
		if row.rssList, err = procStatusBytes(ch.pid(), "VmRSS"); err != nil {
			return fail(err)
		}
		if row.hwmList, err = procStatusBytes(ch.pid(), "VmHWM"); err != nil {
			return fail(err)
		}
	}
	if err := ch.waitReady(ctx, readyForwarded); err != nil {
		return fail(err)
	}
	return ch, nil
}

// waitBlocked polls ch for name (type A) every loadPoll, each poll waiting
// readyPoll for its answer, until the answer is a blocked one, and returns
// the time from started to it; it gives up at started + timeout.
func waitBlocked(ctx context.Context, ch *child, name string, started time.Time, timeout time.Duration) (time.Duration, error) {
	cl := &dns.Client{Timeout: readyPoll}
	q := new(dns.Msg).SetQuestion(dns.Fqdn(name), dns.TypeA)
	deadline := started.Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		select {
		case <-ch.exited:
			return 0, fmt.Errorf("exited while loading: %v", ch.err)
		case <-ctx.Done():
			return 0, ctx.Err()
		default:
		}
		r, _, err := cl.ExchangeContext(ctx, q, ch.addr.String())
		if err == nil {
			if isBlockedAnswer(r) {
				return time.Since(started), nil
			}
			last = "answered " + dns.RcodeToString[r.Rcode] + ", not blocked"
		}
		select {
		case <-time.After(loadPoll):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return 0, fmt.Errorf("no blocked answer for %s within %v (last: %s)", name, timeout, last)
}

// isBlockedAnswer is whether r is one of the blocked answers the servers
// give: NXDOMAIN (dnsmasq's local=), or an A record 0.0.0.0 (nxdnsd's
// null answer, Unbound's always_null, a hosts file's). The fakes answer
// neither.
func isBlockedAnswer(r *dns.Msg) bool {
	if r.Rcode == dns.RcodeNameError {
		return true
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && r.Rcode == dns.RcodeSuccess && a.A.IsUnspecified() {
			return true
		}
	}
	return false
}

// procStatusBytes returns a size field of /proc/PID/status (VmRSS, VmHWM)
// in bytes.
func procStatusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStatus(b, field)
}

func parseProcStatus(b []byte, field string) (int64, error) {
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", field, v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/PID/status has no %s", field)
}

// scrapeMetric reads one unlabelled metric from nxdnsd's /metrics at
// admin; ok is false when it is not served.
func scrapeMetric(ctx context.Context, admin netip.AddrPort, name string) (float64, bool) {
	if !admin.IsValid() {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin.String()+"/metrics", nil)
	if err != nil {
		return 0, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, found := strings.CutPrefix(sc.Text(), name+" "); found {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil && resp.StatusCode == http.StatusOK
		}
	}
	return 0, false
}
