package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/blocking"
	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/load"
	"github.com/nxdnsd/nxdnsd/config"
)

// The blocking rows' list blocks every name of the blocked row's query
// file and none of the forwarding and hits rows' names, and the generated
// configuration that loads it is valid.
func TestBlockListBlocksOnlyTheBlockedRow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	list := filepath.Join(dir, "blocklist.txt")
	if err := writeBlockList(list, 20_000); err != nil {
		t.Fatal(err)
	}
	conf := daemonConf{
		Listen:    netip.MustParseAddrPort("127.0.0.1:5301"),
		Admin:     netip.MustParseAddrPort("127.0.0.1:5302"),
		Upstreams: []upstreamConf{{Name: "primary", Addr: netip.MustParseAddrPort("127.0.0.1:5303"), Slots: 32}},
		BlockList: list,
	}
	cfg, err := config.Parse([]byte(conf.toml()))
	if err != nil {
		t.Fatalf("%v\n%s", err, conf.toml())
	}
	if len(cfg.Blocking.Lists) != 1 || cfg.Blocking.Lists[0].Source != list {
		t.Fatalf("blocking lists %+v", cfg.Blocking.Lists)
	}
	m := blocking.NewManager(blocking.Options{Config: cfg.Blocking})
	m.Start(context.Background())
	defer m.Close()
	if st := m.Lists()[0]; st.State != blocking.StateOK || st.Rules < 20_000 {
		t.Fatalf("the list: %+v", st)
	}
	client := netip.MustParseAddr("127.0.0.1")
	decide := func(name string) bool {
		w, ok := blocking.WireName(name)
		if !ok {
			t.Fatalf("%q", name)
		}
		return m.Engine().Decide(client, nil, w).Blocked
	}
	for _, name := range []string{"q0.bench.example", "q999999.bench.example", "h0.bench.example", "h999.bench.example"} {
		if decide(name) {
			t.Errorf("%s is blocked: it is a forwarding or hits row's name", name)
		}
	}
	queries := filepath.Join(dir, "blocked.txt")
	if err := writeBlockedQueries(queries, 3); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"b0." + blockedZone, "b2." + blockedZone} {
		if !decide(name) {
			t.Errorf("%s is not blocked", name)
		}
	}
}

// latencies is a load result of n answers in 1 ms and slow more in d,
// sorted, over 5 s.
func latencies(n, slow int, d time.Duration) *load.Result {
	res := &load.Result{Sent: n + slow, Elapsed: 5 * time.Second}
	for range n {
		res.Latencies = append(res.Latencies, time.Millisecond)
	}
	for range slow {
		res.Latencies = append(res.Latencies, d)
	}
	return res
}

// The report's blocking table and its four checks, by the median of
// the pairs: one pair far off does not move the verdict (mutation check:
// the mean of the ratios, 0.777, fails the hits line), the columns are each
// side's median run.
func TestReportBlockingRows(t *testing.T) {
	t.Parallel()
	perf := func(qps float64) *perfResult {
		return &perfResult{Sent: int(qps * 5), Completed: int(qps * 5), QPS: qps,
			RunTime: 5 * time.Second, Wall: 5 * time.Second, CPU: 2 * time.Second}
	}
	run := func(qps float64) *fwdRun {
		return &fwdRun{perf: perf(qps), cpu: 3 * time.Second, allocsPerQuery: -1, scrapeAllocs: -1}
	}
	pairs := func(ab ...float64) *pairRuns {
		p := &pairRuns{}
		for i := 0; i < len(ab); i += 2 {
			p.a, p.b = append(p.a, run(ab[i])), append(p.b, run(ab[i+1]))
		}
		return p
	}
	r := report{
		machine: machine{CPUs: 2, Started: time.Now()},
		cfg:     runConfig{perf: perfParams{Duration: 5 * time.Second, Clients: 20, Outstanding: 100, Threads: 2}, names: 1000, hitNames: 100, hits: true, blockRules: 1_000_000, pairs: 3, dnsdistSkip: "-dnsdist=false"},
		throughput: &throughput{
			ceiling: &fwdRun{ceiling: true, perf: perf(200_000)},
			nx:      run(80_000),
			cache:   cacheProbe{Has: true},
			hits:    &hitsRuns{ceiling: &fwdRun{ceiling: true, perf: perf(300_000)}, nx: run(250_000)},
			blocking: &blockingRuns{rules: 1_000_001,
				fwd:     pairs(80_000, 78_000, 70_000, 70_000, 90_000, 88_000),
				hits:    pairs(250_000, 240_000, 240_000, 233_000, 250_000, 100_000),
				blocked: pairs(250_000, 260_000, 240_000, 250_000, 260_000, 265_000),
				refresh: &refreshRun{idle: latencies(100, 0, 0), busy: latencies(98, 2, 1500*time.Microsecond), refreshes: 4, took: 420 * time.Millisecond}},
		},
	}
	md := r.markdown()
	for _, want := range []string{
		"### Blocking: 1,000,001 rules in force",
		"| forwarding: 1,000 names | 80,000 | 7.5 µs | 78,000 | 7.7 µs | 0.978 | 0.975, 1.000, 0.978 |",
		"| hits: 100 names over and over | 250,000 | 2.4 µs | 233,000 | 2.6 µs | 0.960 | 0.960, 0.971, 0.400 |",
		"| blocked: 100 names under blocked.bench.example., every query blocked | hits, with the rules: 250,000 | 2.4 µs | 260,000 | 2.3 µs | 1.040 | 1.040, 1.042, 1.019 |",
		"- pass: issue 27, forwarding with 1,000,001 rules: 0.978 of the QPS without lists >= 0.95 (median of 3 pairs)",
		"- pass: issue 27, hits with 1,000,001 rules: 0.960 of the QPS without lists >= 0.95 (median of 3 pairs)",
		"### Blocking: the hit path during a refresh, load client, 100 names, 0 in flight, 5s each",
		"| no refresh | 20 | 1.00 ms | 1.00 ms | 1.00 ms | 0 |",
		"| 4 refreshes back to back, 420 ms each | 20 | 1.00 ms | 1.50 ms | 1.50 ms | 0 |",
		"- FAIL: issue 27, the hit path's p99 during 4 refreshes: 1.50 ms, 1.50 × its 1.00 ms without <= 1.10 ×",
		"- pass: issue 27, blocked names: 1.040 of the hits row's QPS >= 1 (median of 3 pairs)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	r.throughput.blocking = nil
	if md := r.markdown(); strings.Contains(md, "issue 27") || strings.Contains(md, "### Blocking") {
		t.Errorf("a report without -block-rules has blocking rows:\n%s", md)
	}
}

// refreshLoop against a stand-in for nxdnsd's admin API: each round
// appends a rule to the file, asks for the refresh and waits for the
// rules in force to grow (here a poll later), until the run ends; a
// refresh the API refuses is an error.
func TestRefreshLoop(t *testing.T) {
	t.Parallel()
	list := filepath.Join(t.TempDir(), "list.txt")
	if err := os.WriteFile(list, []byte("||a.example^\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	rules, pending, posts := 1, false, 0
	refuse := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/api/lists/refresh" && r.URL.Query().Get("name") == listName:
			if refuse {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			posts++
			pending = true
			w.WriteHeader(http.StatusAccepted)
		case r.Method == http.MethodGet && r.URL.Path == "/api/lists":
			if pending { // the new copy is in force at the poll after the refresh
				rules, pending = rules+1, false
				if rules == 4 {
					cancel()
				}
			}
			fmt.Fprintf(w, `{"lists":[{"name":%q,"rules":%d}]}`, listName, rules)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	nx := &child{admin: netip.MustParseAddrPort(strings.TrimPrefix(srv.URL, "http://"))}
	n, mean, err := refreshLoop(ctx, nx, list)
	if err != nil || n < 2 || n > 3 || mean <= 0 {
		t.Fatalf("refreshLoop: %d rounds, mean %v, %v; want 2 or 3 rounds (the run ended in the third or fourth)", n, mean, err)
	}
	b, _ := os.ReadFile(list)
	if lines := strings.Count(string(b), "\n"); lines != 1+posts {
		t.Errorf("the list has %d lines after %d refreshes, want one more each", lines, posts)
	}
	mu.Lock()
	refuse = true
	mu.Unlock()
	if _, _, err := refreshLoop(context.Background(), nx, list); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("a refused refresh: %v, want the 503", err)
	}
}
