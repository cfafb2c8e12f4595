package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nxdnsd/nxdnsd/blocking/blocktest"
	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/fake"
)

// The blocking rows (-block-rules N, issue 27): nxdnsd's forwarding and
// hits rows again with a generated list of N rules in force, and a
// blocked-name row, every query blocked. The generated names end in the
// generator's TLDs, never in example., so no query of the other rows is
// blocked; the blocked row asks names under blockedZone, which one rule
// of the list blocks.

// blockedZone is the zone the list's one extra rule blocks, ||blockedZone^.
const blockedZone = "blocked.bench.example"

// maxBlockLoss is issue 27's bound: the hits and forwarding rows with the
// rules loaded at most 5 % below the same rows without lists.
const maxBlockLoss = 0.05

// blockingRuns are the blocking rows: each nil when not measured.
type blockingRuns struct {
	rules   int     // in the generated list, the blocked zone's rule included
	fwd     *fwdRun // the forwarding row with the list
	hits    *fwdRun // the hits row with the list
	blocked *fwdRun // every query blocked, the list in force
}

// writeBlockList writes the generated list of n rules and ||blockedZone^
// to path.
func writeBlockList(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := blocktest.New(27).WriteList(f, blocktest.Mix{Rules: n}, 0); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := fmt.Fprintf(f, "||%s^\n", blockedZone); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// writeBlockedQueries writes dnsperf's input for the blocked row: n
// distinct names under blockedZone.
func writeBlockedQueries(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	for i := range n {
		w.WriteString("b" + strconv.Itoa(i) + "." + blockedZone + ". A\n")
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// measureBlocking runs the blocking rows after the others, in the same
// run and against the same fakes: a fresh nxdnsd with the list for the
// forwarding row (its cache as the forwarding row's), another with its
// cache on for the hits row (the hits rows' query file, hits.txt in dir)
// and then the blocked row.
func measureBlocking(ctx context.Context, c runConfig, dir string, t *throughput, primary, secondary *fake.Server,
	upstream func() uint64, progress func(string, ...any)) (*blockingRuns, error) {
	list := filepath.Join(dir, "blocklist.txt")
	progress("writing a block list of %d rules", c.blockRules)
	if err := writeBlockList(list, c.blockRules); err != nil {
		return nil, err
	}
	br := &blockingRuns{rules: c.blockRules + 1}

	conf, err := c.nxdnsdConf(primary, secondary, 32, "")
	if err != nil {
		return nil, err
	}
	conf.Cache = t.cache.enabled(c.forwardCache)
	conf.BlockList = list
	nx, err := startChild(ctx, c.nxdnsd, dir, "throughput-blocking", conf)
	if err != nil {
		return nil, err
	}
	progress("forwarding, %d rules in force: dnsperf %s -> nxdnsd %s -> fake upstreams", br.rules, c.perf, nx.addr)
	br.fwd, err = measure(ctx, c, nx, nx.addr, filepath.Join(dir, "queries.txt"), upstream, nil)
	nx.stop()
	if err != nil {
		return nil, err
	}

	blocked := filepath.Join(dir, "blocked.txt")
	if err := writeBlockedQueries(blocked, c.hitNames); err != nil {
		return nil, err
	}
	if conf, err = c.nxdnsdConf(primary, secondary, 32, ""); err != nil {
		return nil, err
	}
	conf.Cache = t.cache.enabled(true)
	conf.BlockList = list
	if nx, err = startChild(ctx, c.nxdnsd, dir, "hits-blocking", conf); err != nil {
		return nil, err
	}
	defer nx.stop()
	if t.hits != nil && t.hits.nx != nil {
		progress("hits, %d rules in force: dnsperf %s -> nxdnsd %s, cache on", br.rules, c.perf, nx.addr)
		if br.hits, err = measure(ctx, c, nx, nx.addr, filepath.Join(dir, "hits.txt"), upstream, nil); err != nil {
			return nil, err
		}
	}
	progress("blocked names: dnsperf %s, %d names under %s -> nxdnsd %s", c.perf, c.hitNames, blockedZone, nx.addr)
	if br.blocked, err = measure(ctx, c, nx, nx.addr, blocked, upstream, nil); err != nil {
		return nil, err
	}
	return br, nil
}

// writeBlocking is the blocking rows' table: each row with the list
// beside the same row without, and the blocked row beside the hits row.
func (r *report) writeBlocking(b *strings.Builder, t *throughput) {
	br := t.blocking
	fmt.Fprintf(b, "\n### Blocking: %s rules in force (generated, blocktest), dnsperf %s, UDP\n\n", thousands(float64(br.rules)), r.cfg.perf)
	fmt.Fprintf(b, "| row | without lists: QPS | CPU per query | with the rules: QPS | CPU per query | with / without |\n")
	fmt.Fprintf(b, "| --- | ---: | ---: | ---: | ---: | ---: |\n")
	row := func(name string, without, with *fwdRun) {
		if without == nil || with == nil {
			fmt.Fprintf(b, "| %s | – | – | – | – | – |\n", name)
			return
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %.3f |\n", name, thousands(without.perf.QPS), usPerQuery(without),
			thousands(with.perf.QPS), usPerQuery(with), with.perf.QPS/without.perf.QPS)
	}
	row(fmt.Sprintf("forwarding: %s names", thousands(float64(r.cfg.names))), t.nx, br.fwd)
	var hits *fwdRun
	if t.hits != nil {
		hits = t.hits.nx
	}
	row(fmt.Sprintf("hits: %s names over and over", thousands(float64(r.cfg.hitNames))), hits, br.hits)
	if x := br.blocked; x != nil {
		fmt.Fprintf(b, "| blocked: %s names under %s., every query blocked | – | – | %s | %s | – |\n",
			thousands(float64(r.cfg.hitNames)), blockedZone, thousands(x.perf.QPS), usPerQuery(x))
	}
	fmt.Fprintf(b, "\nThe rows without lists are the throughput and hits tables' own nxdnsd rows; the rows with the rules are a fresh nxdnsd "+
		"with the same settings and one `[[blocking.lists]]` file of the generated rules (`||%s^` among them), loaded before it answered. "+
		"The blocked row runs on the hits row's nxdnsd, after it.\n", blockedZone)
}

// verdictBlocking is issue 27's check: the forwarding and hits rows with
// the rules at most maxBlockLoss below the same rows without, the blocked
// row at least as fast as the hits row. t.blocking is not nil.
func (r *report) verdictBlocking(check func(bool, string, ...any), notChecked func(string, ...any), t *throughput) {
	br := t.blocking
	if br.fwd != nil {
		ratio := br.fwd.perf.QPS / t.nx.perf.QPS
		check(ratio >= 1-maxBlockLoss, "issue 27, forwarding with %s rules: %.3f of the QPS without lists >= %.2f", thousands(float64(br.rules)), ratio, 1-maxBlockLoss)
	}
	if t.hits == nil || t.hits.nx == nil || br.hits == nil {
		notChecked("issue 27, hits with the rules and the blocked row against hits: no hits row")
		return
	}
	ratio := br.hits.perf.QPS / t.hits.nx.perf.QPS
	check(ratio >= 1-maxBlockLoss, "issue 27, hits with %s rules: %.3f of the QPS without lists >= %.2f", thousands(float64(br.rules)), ratio, 1-maxBlockLoss)
	check(br.blocked.perf.QPS >= t.hits.nx.perf.QPS, "issue 27, blocked names: QPS %s >= the hits row's %s",
		thousands(br.blocked.perf.QPS), thousands(t.hits.nx.perf.QPS))
}
