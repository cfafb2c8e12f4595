package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/fake"
)

// The history rows (-history, issue 28): nxdnsd's forwarding and hits
// rows again with the query history on, in a file of the work directory,
// beside the same rows with it off (every other row runs with
// `[history] enabled = false`). After each run the child's
// nxdns_history_rows_total and nxdns_history_dropped_total say how many
// rows were written and lost.

// maxHistoryLoss is issue 28's bound: the forwarding and hits rows with
// the history on at most 5 % below the same rows with it off.
const maxHistoryLoss = 0.05

// historyRuns are the history rows: each nil when not measured.
type historyRuns struct {
	fwd, hits *historyRun
	rate      *historyRun // forwarding at -history-qps
}

// historyRun is one row with the history on and what its history counted.
type historyRun struct {
	run              *fwdRun
	rows, dropped    uint64
	countsKnown      bool // both series were read
	file             string
	rowsBeforeRunner uint64 // written before dnsperf started (the readiness queries)
}

// measureHistory runs the history rows after the others, in the same run
// and against the same fakes: a fresh nxdnsd with the history in a new
// file for each row, its cache as the row's without.
func measureHistory(ctx context.Context, c runConfig, dir string, t *throughput, primary, secondary *fake.Server,
	upstream func() uint64, progress func(string, ...any)) (*historyRuns, error) {
	hr := &historyRuns{}
	one := func(name, queries string, cache bool, c runConfig) (*historyRun, error) {
		conf, err := c.nxdnsdConf(primary, secondary, 32, "")
		if err != nil {
			return nil, err
		}
		conf.Cache = t.cache.enabled(cache)
		conf.HistoryPath = filepath.Join(dir, name+".db")
		nx, err := startChild(ctx, c.nxdnsd, dir, name, conf)
		if err != nil {
			return nil, err
		}
		defer nx.stop()
		h := &historyRun{file: conf.HistoryPath}
		before, _ := nx.metric(ctx, "nxdns_history_rows_total")
		progress("%s, the history on in %s: dnsperf %s -> nxdnsd %s", name, conf.HistoryPath, c.perf, nx.addr)
		if h.run, err = measure(ctx, c, nx, nx.addr, queries, upstream, nil); err != nil {
			return nil, err
		}
		// The writer may still hold the last batch: a scrape now counts it
		// as neither written nor dropped, which the report says.
		rows, okR := nx.metric(ctx, "nxdns_history_rows_total")
		dropped, okD := nx.metric(ctx, "nxdns_history_dropped_total")
		h.rows, h.dropped, h.countsKnown, h.rowsBeforeRunner = rows-before, dropped, okR && okD, before
		return h, nil
	}
	var err error
	if hr.fwd, err = one("throughput-history", filepath.Join(dir, "queries.txt"), c.forwardCache, c); err != nil {
		return nil, err
	}
	if t.hits != nil && t.hits.nx != nil {
		if hr.hits, err = one("hits-history", filepath.Join(dir, "hits.txt"), true, c); err != nil {
			return nil, err
		}
	}
	if c.historyQPS > 0 {
		rc := c
		rc.perf.MaxQPS = c.historyQPS
		if hr.rate, err = one("rate-history", filepath.Join(dir, "queries.txt"), c.forwardCache, rc); err != nil {
			return nil, err
		}
	}
	return hr, nil
}

// writeHistory is the history rows' table: each row with the history on
// beside the same row with it off.
func (r *report) writeHistory(b *strings.Builder, t *throughput) {
	hr := t.history
	fmt.Fprintf(b, "\n### Query history: on, in a file (issue 28), dnsperf %s, UDP\n\n", r.cfg.perf)
	fmt.Fprintf(b, "| row | history off: QPS | CPU per query | history on: QPS | CPU per query | on / off | rows written | rows dropped |\n")
	fmt.Fprintf(b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	row := func(name string, off *fwdRun, on *historyRun) {
		if off == nil || on == nil {
			fmt.Fprintf(b, "| %s | – | – | – | – | – | – | – |\n", name)
			return
		}
		written, dropped := "?", "?"
		if on.countsKnown {
			written, dropped = thousands(float64(on.rows)), thousands(float64(on.dropped))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %.3f | %s | %s |\n", name, thousands(off.perf.QPS), usPerQuery(off),
			thousands(on.run.perf.QPS), usPerQuery(on.run), on.run.perf.QPS/off.perf.QPS, written, dropped)
	}
	row(fmt.Sprintf("forwarding: %s names", thousands(float64(r.cfg.names))), t.nx, hr.fwd)
	var hits *fwdRun
	if t.hits != nil {
		hits = t.hits.nx
	}
	row(fmt.Sprintf("hits: %s names over and over", thousands(float64(r.cfg.hitNames))), hits, hr.hits)
	if x := hr.rate; x != nil {
		written, dropped := "?", "?"
		if x.countsKnown {
			written, dropped = thousands(float64(x.rows)), thousands(float64(x.dropped))
		}
		fmt.Fprintf(b, "| forwarding at dnsperf -Q %d | – | – | %s | %s | – | %s | %s |\n",
			r.cfg.historyQPS, thousands(x.run.perf.QPS), usPerQuery(x.run), written, dropped)
	}
	fmt.Fprintf(b, "\nThe rows with the history off are the throughput and hits tables' own nxdnsd rows (`[history] enabled = false`); "+
		"the rows with it on are a fresh nxdnsd with the same settings and `[history] path` a new file in the work directory. "+
		"Rows written and dropped are nxdns_history_rows_total and nxdns_history_dropped_total scraped right after dnsperf ended "+
		"(written: less the readiness queries'); a batch still being written then is in neither.\n")
}

// verdictHistory is issue 28's check: the forwarding row with the history
// on at most maxHistoryLoss below it off; no row dropped at -history-qps;
// the hits row within maxHistoryLoss (drops there are counted, not a
// failure).
func (r *report) verdictHistory(check func(bool, string, ...any), notChecked func(string, ...any), t *throughput) {
	hr := t.history
	if on := hr.fwd; on != nil {
		ratio := on.run.perf.QPS / t.nx.perf.QPS
		check(ratio >= 1-maxHistoryLoss, "issue 28, forwarding with the history on: %.3f of the QPS with it off >= %.2f (rows dropped: %d)",
			ratio, 1-maxHistoryLoss, on.dropped)
	}
	if x := hr.rate; x != nil {
		check(x.countsKnown && x.dropped == 0 && x.run.perf.QPS >= 0.95*float64(r.cfg.historyQPS),
			"issue 28, forwarding at dnsperf -Q %d for %s: %s queries/s answered, nxdns_history_dropped_total %d, want 0",
			r.cfg.historyQPS, r.cfg.perf.Duration, thousands(x.run.perf.QPS), x.dropped)
	}
	if t.hits == nil || t.hits.nx == nil || hr.hits == nil {
		notChecked("issue 28, hits with the history on: no hits row")
		return
	}
	ratio := hr.hits.run.perf.QPS / t.hits.nx.perf.QPS
	check(ratio >= 1-maxHistoryLoss, "issue 28, hits with the history on: %.3f of the QPS with it off >= %.2f (rows dropped: %d, counted)",
		ratio, 1-maxHistoryLoss, hr.hits.dropped)
}
