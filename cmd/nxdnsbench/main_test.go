package main

import (
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/fake"
	"github.com/nxdnsd/nxdnsd/config"
)

// dnsperfOutput is dnsperf 2.10's statistics, trimmed of its status lines.
const dnsperfOutput = `
Statistics:

  Queries sent:         665043
  Queries completed:    665040 (100.00%)
  Queries lost:         3 (0.00%)

  Response codes:       NOERROR 665040 (100.00%)
  Average packet size:  request 37, response 53
  Run time (s):         3.000241
  Queries per second:   221663.193057

  Average Latency (s):  0.000311 (min 0.000006, max 0.010860)
  Latency StdDev (s):   0.000302
`

func TestParseDNSPerf(t *testing.T) {
	t.Parallel()
	r, err := parseDNSPerf([]byte(dnsperfOutput))
	if err != nil {
		t.Fatal(err)
	}
	want := perfResult{
		Sent: 665043, Completed: 665040, Lost: 3, QPS: 221663.193057,
		RunTime:     3000241 * time.Microsecond,
		MeanLatency: 311 * time.Microsecond, MaxLatency: 10860 * time.Microsecond,
	}
	if *r != want {
		t.Fatalf("parsed\n%+v\nwant\n%+v", *r, want)
	}
	if _, err := parseDNSPerf([]byte("dnsperf: socket: too many open files\n")); err == nil {
		t.Fatal("parsed output without statistics")
	}
}

// TestDaemonConfIsValid checks the generated configuration against
// nxdnsd's own loader: unknown keys or bad values would stop the benchmark.
func TestDaemonConfIsValid(t *testing.T) {
	t.Parallel()
	conf := daemonConf{
		Listen: netip.MustParseAddrPort("127.0.0.1:5301"),
		Admin:  netip.MustParseAddrPort("127.0.0.1:5302"),
		Upstreams: []upstreamConf{
			{Name: "primary", Addr: netip.MustParseAddrPort("127.0.0.1:5303"), Slots: 20},
			{Name: "secondary", Addr: netip.MustParseAddrPort("127.0.0.1:5304"), Slots: 32},
		},
	}
	cfg, err := config.Parse([]byte(conf.toml()))
	if err != nil {
		t.Fatalf("%v\n%s", err, conf.toml())
	}
	if len(cfg.Upstreams) != 2 || cfg.Upstreams[0].Slots != 20 || cfg.Upstream.AttemptTimeoutMS != 2500 ||
		cfg.Upstream.TotalTimeoutMS != 5000 || cfg.Server.Listen[0] != "127.0.0.1:5301" {
		t.Fatalf("loaded %+v", cfg)
	}
}

// TestDoTDaemonConf checks the DoT row's configuration against nxdnsd's own
// loader: the shipped upstream settings, each upstream
// tls://dns.test:PORT pinned to the fake's IP and trusting the run's CA
// file, which the loader reads.
func TestDoTDaemonConf(t *testing.T) {
	t.Parallel()
	serverTLS, caFile, err := newTestCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(caFile) {
		t.Fatalf("CA file %q is relative: nxdnsd would resolve it against the configuration's directory", caFile)
	}
	primary, secondary, err := startFakes(runConfig{sockets: 1}, fake.Mode{}, serverTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close()
	defer secondary.Close()
	conf, err := newDaemonConf(primary, secondary, 32, caFile)
	if err != nil {
		t.Fatal(err)
	}
	text := conf.toml()
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if cfg.Upstream.AttemptTimeoutMS != 2500 || cfg.Upstream.TotalTimeoutMS != 5000 || len(cfg.Upstreams) != 2 {
		t.Fatalf("loaded %+v\n%s", cfg, text)
	}
	for i, f := range []*fake.Server{primary, secondary} {
		u := cfg.Upstreams[i]
		want := "tls://dns.test:" + strings.TrimPrefix(f.TLSAddr().String(), "127.0.0.1:")
		if u.Address != want || u.IP != "127.0.0.1" || u.CAFile != caFile || u.Slots != 32 || (u.Enabled != nil && !*u.Enabled) {
			t.Errorf("upstreams[%d] = %+v, want address %s, ip 127.0.0.1, ca_file %s, 32 slots\n%s", i, u, want, caFile, text)
		}
	}

	// Without DoT fakes there is no DoT configuration.
	plain, err := fake.Start(fake.Config{Addr: "127.0.0.1:0", Sockets: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := newDaemonConf(plain, plain, 32, caFile); err == nil {
		t.Error("a DoT configuration for fakes that serve no DoT")
	}
}

// TestReportDoTRow renders a report with a DoT row: its own line in the
// throughput table, its CPU and allocation figures, and no threshold.
func TestReportDoTRow(t *testing.T) {
	t.Parallel()
	perf := func(qps float64) *perfResult {
		return &perfResult{Sent: int(qps * 5), Completed: int(qps * 5), QPS: qps,
			RunTime: 5 * time.Second, Wall: 5 * time.Second, CPU: 2 * time.Second,
			MeanLatency: time.Millisecond, MaxLatency: 10 * time.Millisecond}
	}
	nx := func(qps float64, allocs float64) *fwdRun {
		return &fwdRun{perf: perf(qps), fakeCPU: time.Second, cpu: 3 * time.Second, peakRSS: 20 << 20,
			allocsPerQuery: allocs, scrapeAllocs: 300}
	}
	r := report{
		machine: machine{CPUs: 2, Started: time.Now()},
		cfg: runConfig{perf: perfParams{Duration: 5 * time.Second, Clients: 20, Outstanding: 100, Threads: 2}, names: 1000, dot: true,
			dnsdistSkip: "-dnsdist=false"},
		throughput: &throughput{
			ceiling: &fwdRun{ceiling: true, perf: perf(200_000), fakeCPU: time.Second},
			nx:      nx(80_000, 1.5),
			dot:     &dotRun{fwdRun: nx(50_000, 4.25), fakeStats: fake.Stats{Queries: 250_000, Answers: 250_000, TLSConns: 2}, wall: 7 * time.Second},
		},
	}
	md := r.markdown()
	for _, want := range []string{
		"| dnsperf → nxdnsd → fake (DoT) | 50,000 | 0.25 | 250,000 | 0 | 1.00 ms | 10.0 ms | 12.0 µs | 40 / 20 / 60 / 0 / 0 | 20.0 MiB |",
		"; DoT run dnsperf 8.0 µs, fakes 4.0 µs.",
		"With DoT upstreams: 4.25 per query",
		"on 2 TLS connections",
		"took 7s",
		"- info (no threshold): DoT upstreams: ratio to the same-run ceiling 0.250, heap allocations per query 4.25",
		"tls://dns.test:PORT",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if n := strings.Count(md, "- FAIL") + strings.Count(md, "- pass"); n != 3 {
		t.Errorf("%d checks, want the UDP row's 3 alone:\n%s", n, md)
	}

	r.throughput.dot, r.cfg.dot = nil, false
	if md := r.markdown(); strings.Contains(md, "DoT") {
		t.Errorf("a report without -dot mentions DoT:\n%s", md)
	}
}

func TestFormats(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 221663.6: "221,664", 1e6: "1,000,000"} {
		if got := thousands(v); got != want {
			t.Errorf("thousands(%v) = %q, want %q", v, got, want)
		}
	}
	for d, want := range map[time.Duration]string{
		311 * time.Microsecond: "0.311 ms", 4500 * time.Microsecond: "4.50 ms",
		22500 * time.Microsecond: "22.5 ms", 2503 * time.Millisecond: "2503 ms",
	} {
		if got := ms(d); got != want {
			t.Errorf("ms(%v) = %q, want %q", d, got, want)
		}
	}
}
