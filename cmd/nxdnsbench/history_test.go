package main

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/config"
)

// The history rows' table and issue 28's checks: each row beside the
// same row with the history off (the hits row by its pairs' median,
// which one pair far off does not move; a row without pairs against the
// throughput table's), the rate-limited row on its drops, the hits row on
// its ratio only.
func TestHistoryReport(t *testing.T) {
	t.Parallel()
	perf := func(qps float64) *perfResult {
		return &perfResult{Sent: int(qps * 5), Completed: int(qps * 5), QPS: qps,
			RunTime: 5 * time.Second, Wall: 5 * time.Second, CPU: 2 * time.Second}
	}
	run := func(qps float64) *fwdRun {
		return &fwdRun{perf: perf(qps), cpu: 3 * time.Second, allocsPerQuery: -1, scrapeAllocs: -1}
	}
	r := report{
		machine: machine{CPUs: 2, Started: time.Now()},
		cfg:     runConfig{perf: perfParams{Duration: 5 * time.Second, Clients: 20, Outstanding: 100, Threads: 2}, names: 1000, hitNames: 100, hits: true, history: true, historyKnown: true, historyQPS: 20_000, dnsdistSkip: "-dnsdist=false"},
		throughput: &throughput{
			ceiling: &fwdRun{ceiling: true, perf: perf(200_000)},
			nx:      run(80_000),
			cache:   cacheProbe{Has: true},
			hits:    &hitsRuns{ceiling: &fwdRun{ceiling: true, perf: perf(300_000)}, nx: run(250_000)},
			history: &historyRuns{
				fwd: &historyRun{run: run(78_000), rows: 390_000, dropped: 12, countsKnown: true},
				hits: &historyRun{run: run(236_000), rows: 200_000, dropped: 1_000_000, countsKnown: true, pairs: &pairRuns{
					a: []*fwdRun{run(250_000), run(240_000), run(250_000)},
					b: []*fwdRun{run(240_000), run(236_000), run(120_000)},
				}},
				rate: &historyRun{run: run(20_000), rows: 100_000, countsKnown: true},
			},
		},
	}
	md := r.markdown()
	for _, want := range []string{
		"`[history] enabled = false` for every row but the history rows",
		"### Query history: on, in a file (issue 28)",
		"| forwarding: 1,000 names | 80,000 | 7.5 µs | 78,000 | 7.7 µs | 0.975 | 390,000 | 12 |",
		"| hits: 100 names over and over | 250,000 | 2.4 µs | 236,000 | 2.5 µs | 0.960 (0.960, 0.983, 0.480) | 200,000 | 1,000,000 |",
		"| forwarding at dnsperf -Q 20000 | – | – | 20,000 | 30.0 µs | – | 100,000 | 0 |",
		"- pass: issue 28, forwarding with the history on: 0.975 of the QPS with it off >= 0.95 (rows dropped: 12)",
		"- pass: issue 28, forwarding at dnsperf -Q 20000 for 5s: 20,000 queries/s answered, nxdns_history_dropped_total 0, want 0",
		"- pass: issue 28, hits with the history on: 0.960 of the QPS with it off >= 0.95 (rows dropped: 1000000, counted)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	r.throughput.history = nil
	if md := r.markdown(); strings.Contains(md, "issue 28") || strings.Contains(md, "### Query history") {
		t.Errorf("a report without -history has history rows:\n%s", md)
	}
}

// The generated configuration's [history] table: none, off, or on in a
// file.
func TestDaemonConfHistory(t *testing.T) {
	t.Parallel()
	var c daemonConf
	if strings.Contains(c.toml(), "[history]") {
		t.Errorf("a [history] table by default:\n%s", c.toml())
	}
	c.HistoryOff = true
	if !strings.Contains(c.toml(), "\n[history]\nenabled = false\n") {
		t.Errorf("HistoryOff:\n%s", c.toml())
	}
	c.HistoryPath = "/tmp/x/h.db"
	if !strings.Contains(c.toml(), "\n[history]\nenabled = true\npath = \"/tmp/x/h.db\"\n") {
		t.Errorf("HistoryPath:\n%s", c.toml())
	}
}

// With -history-store postgres: the rows' CPU per query counts the
// PostgreSQL server's too, in a column of its own as well, and the rows
// in each database; issue 32's checks, the rate row failing when the
// database lacks a row of a query answered or when one was dropped.
func TestHistoryReportPostgres(t *testing.T) {
	t.Parallel()
	perf := func(qps float64) *perfResult {
		return &perfResult{Sent: int(qps * 5), Completed: int(qps * 5), QPS: qps,
			RunTime: 5 * time.Second, Wall: 5 * time.Second, CPU: 2 * time.Second}
	}
	run := func(qps float64) *fwdRun {
		return &fwdRun{perf: perf(qps), cpu: 3 * time.Second, allocsPerQuery: -1, scrapeAllocs: -1}
	}
	rep := func(rate *historyRun) *report {
		return &report{
			machine: machine{CPUs: 2, Started: time.Now()},
			cfg: runConfig{perf: perfParams{Duration: 5 * time.Second, Clients: 20, Outstanding: 100, Threads: 2}, names: 1000, hitNames: 100,
				history: true, historyKnown: true, historyQPS: 20_000, historyQPSLen: time.Minute, historyStore: storePostgres, dnsdistSkip: "-dnsdist=false"},
			throughput: &throughput{
				ceiling: &fwdRun{ceiling: true, perf: perf(200_000)},
				nx:      run(80_000),
				cache:   cacheProbe{Has: true},
				history: &historyRuns{
					pgVersion: "15.8",
					// 400,000 queries: nxdnsd's 3 s and PostgreSQL's 1 s.
					fwd:  &historyRun{run: run(78_000), rows: 390_000, dropped: 12, countsKnown: true, pgCPU: time.Second, pgCPUKnown: true, dbRows: 390_005},
					rate: rate,
				},
			},
		}
	}
	// 100,000 queries: nxdnsd's 3 s and PostgreSQL's 0.5 s.
	rate := &historyRun{run: run(20_000), rows: 100_000, countsKnown: true, pgCPU: 500 * time.Millisecond, pgCPUKnown: true, dbRows: 100_003}
	md := rep(rate).markdown()
	for _, want := range []string{
		"whose history is `[history] postgres`, a database of each row's own on a throwaway PostgreSQL server",
		"### Query history: on, in PostgreSQL (issue 32)",
		"| row | history off: QPS | CPU per query | history on: QPS | CPU per query, nxdnsd + PostgreSQL | of which PostgreSQL | on / off: median (the pairs) | rows written | rows dropped | rows in the database |",
		"| forwarding: 1,000 names | 80,000 | 7.5 µs | 78,000 | 10.3 µs | 2.6 µs | 0.975 | 390,000 | 12 | 390,005 |",
		"| hits: 100 names over and over | – | – | – | – | – | – | – | – | – |",
		"| forwarding at dnsperf -Q 20000 -l 1m0s | – | – | 20,000 | 35.0 µs | 5.0 µs | – | 100,000 | 0 | 100,003 |",
		"PostgreSQL 15.8 server on loopback",
		"- pass: issue 32, forwarding with history.postgres: 0.975 of the QPS with the history off >= 0.95 (rows dropped: 12)",
		"- pass: issue 32, forwarding at dnsperf -Q 20000 for 1m0s with history.postgres: 20,000 queries/s answered, nxdns_history_dropped_total 0 (want 0), 100,003 rows in the database for 100,000 queries answered",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "issue 28") {
		t.Errorf("issue 28's checks with PostgreSQL:\n%s", md)
	}

	short := *rate
	short.dbRows = 99_999
	dropped := *rate
	dropped.dropped = 1
	unknown := *rate
	unknown.pgCPUKnown, unknown.dbErr = false, errors.New("connection refused")
	for name, x := range map[string]*historyRun{"a row short": &short, "one dropped": &dropped, "not counted": &unknown} {
		md := rep(x).markdown()
		if !strings.Contains(md, "- FAIL: issue 32, forwarding at dnsperf -Q 20000") {
			t.Errorf("%s: the rate row's check does not fail:\n%s", name, md)
		}
	}
	if md := rep(&unknown).markdown(); !strings.Contains(md, "| forwarding at dnsperf -Q 20000 -l 1m0s | – | – | 20,000 | ? | ? | – | 100,000 | 0 | ? |") {
		t.Errorf("PostgreSQL's CPU and rows unknown, not said so:\n%s", md)
	}
}

// A row with history.postgres writes the connection string and the
// instance, and nxdnsd's loader takes it.
func TestDaemonConfHistoryPostgres(t *testing.T) {
	t.Parallel()
	c := daemonConf{
		Listen:          netip.MustParseAddrPort("127.0.0.1:5301"),
		Admin:           netip.MustParseAddrPort("127.0.0.1:5302"),
		Upstreams:       []upstreamConf{{Name: "primary", Addr: netip.MustParseAddrPort("127.0.0.1:5303"), Slots: 20}},
		HistoryOff:      true,
		HistoryPostgres: "postgres://postgres@127.0.0.1:5432/throughput_history?sslmode=disable",
		HistoryInstance: "throughput-history",
	}
	cfg, err := config.Parse([]byte(c.toml()))
	if err != nil {
		t.Fatalf("%v\n%s", err, c.toml())
	}
	if h := cfg.History; !h.Enabled || h.Postgres != c.HistoryPostgres || h.Instance != "throughput-history" || h.Path != "" {
		t.Errorf("loaded %+v from\n%s", h, c.toml())
	}
}
