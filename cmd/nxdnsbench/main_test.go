package main

import (
	"net/netip"
	"testing"
	"time"

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
