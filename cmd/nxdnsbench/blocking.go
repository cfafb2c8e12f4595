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

// blockingRuns are the blocking rows, each measured side by side
// (pairs.go): a is an nxdnsd without lists, b one with the generated
// list; each nil when not measured.
type blockingRuns struct {
	rules   int       // in the generated list, the blocked zone's rule included
	fwd     *pairRuns // the forwarding row
	hits    *pairRuns // the hits row
	blocked *pairRuns // at the process with the list, a: the hits row's load; b: every query blocked
	refresh *refreshRun
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
// run and against the same fakes, each side by side (pairs.go): for the
// forwarding row an nxdnsd without lists and one with the list for every
// pair, their caches as the forwarding row's; for the hits row the same
// with their caches on (the hits rows' query file, hits.txt in dir). The
// blocked row runs, at one nxdnsd with the list for every pair, the hits
// row's load beside the blocked names: the same rules in force and the
// same process, so that only what a blocked name costs beside a hit
// differs. The refresh row has one more nxdnsd with the list.
func measureBlocking(ctx context.Context, c runConfig, dir string, t *throughput, primary, secondary *fake.Server,
	upstream func() uint64, progress func(string, ...any)) (*blockingRuns, error) {
	list := filepath.Join(dir, "blocklist.txt")
	progress("writing a block list of %d rules", c.blockRules)
	if err := writeBlockList(list, c.blockRules); err != nil {
		return nil, err
	}
	br := &blockingRuns{rules: c.blockRules + 1}
	// start starts an nxdnsd named name, with the list or not, its cache
	// on or not.
	start := func(name string, withList, cache bool) (*child, error) {
		conf, err := c.nxdnsdConf(primary, secondary, 32, "")
		if err != nil {
			return nil, err
		}
		conf.Cache = t.cache.enabled(cache)
		if withList {
			conf.BlockList = list
		}
		return startChild(ctx, c.nxdnsd, dir, name, conf)
	}
	// beside are a pair's processes without the list and with it.
	beside := func(name, queries string, cache bool) pairProcs {
		return func(i int) (a, b *child, stop func(), err error) {
			return startPair(ctx, c, queries,
				func() (*child, error) { return start(fmt.Sprintf("%s-plain-%d", name, i+1), false, cache) },
				func() (*child, error) { return start(fmt.Sprintf("%s-blocking-%d", name, i+1), true, cache) })
		}
	}

	queries := filepath.Join(dir, "queries.txt")
	label := fmt.Sprintf("forwarding, a: no lists, b: %d rules in force", br.rules)
	var err error
	if br.fwd, err = measurePairs(ctx, c, c.pairs, beside("throughput", queries, c.forwardCache), queries, queries, upstream, progress, label); err != nil {
		return nil, err
	}
	if t.hits == nil || t.hits.nx == nil {
		return br, nil // no cache: no hits row, and no blocked row beside it
	}

	blocked := filepath.Join(dir, "blocked.txt")
	if err := writeBlockedQueries(blocked, c.hitNames); err != nil {
		return nil, err
	}
	hits := filepath.Join(dir, "hits.txt")
	label = fmt.Sprintf("hits, a: no lists, b: %d rules in force", br.rules)
	if br.hits, err = measurePairs(ctx, c, c.pairs, beside("hits", hits, true), hits, hits, upstream, progress, label); err != nil {
		return nil, err
	}
	one := func(i int) (a, b *child, stop func(), err error) {
		nx, err := start(fmt.Sprintf("blocked-%d", i+1), true, true)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := warmUp(ctx, c, hits, nx); err != nil {
			nx.stop()
			return nil, nil, nil, err
		}
		return nx, nx, nx.stop, nil
	}
	label = fmt.Sprintf("at the process with the rules, a: hits, b: %d names under %s, every query blocked", c.hitNames, blockedZone)
	if br.blocked, err = measurePairs(ctx, c, c.pairs, one, hits, blocked, upstream, progress, label); err != nil {
		return nil, err
	}
	if c.latency > 0 {
		listed, err := start("refresh", true, true)
		if err != nil {
			return nil, err
		}
		defer listed.stop()
		if br.refresh, err = measureRefresh(ctx, c, listed, list, progress); err != nil {
			return nil, err
		}
	}
	return br, nil
}

// writeBlocking is the blocking rows' table: each row with the list
// beside the same row without, measured side by side, and the blocked
// row beside the hits row.
func (r *report) writeBlocking(b *strings.Builder, t *throughput) {
	br := t.blocking
	fmt.Fprintf(b, "\n### Blocking: %s rules in force (generated, blocktest), dnsperf %s, UDP, %d pairs side by side\n\n",
		thousands(float64(br.rules)), r.cfg.perf, r.cfg.pairs)
	fmt.Fprintf(b, "| row | without lists: QPS | CPU per query | with the rules: QPS | CPU per query | with / without: median | the pairs |\n")
	fmt.Fprintf(b, "| --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	row := func(name, without string, p *pairRuns) {
		if p == nil {
			fmt.Fprintf(b, "| %s | – | – | – | – | – | not measured |\n", name)
			return
		}
		a, w := p.medianA(), p.medianB()
		fmt.Fprintf(b, "| %s | %s%s | %s | %s | %s | %.3f | %s |\n", name, without, thousands(a.perf.QPS), usPerQuery(a),
			thousands(w.perf.QPS), usPerQuery(w), p.ratio(), p.ratiosText())
	}
	row(fmt.Sprintf("forwarding: %s names", thousands(float64(r.cfg.names))), "", br.fwd)
	row(fmt.Sprintf("hits: %s names over and over", thousands(float64(r.cfg.hitNames))), "", br.hits)
	row(fmt.Sprintf("blocked: %s names under %s., every query blocked", thousands(float64(r.cfg.hitNames)), blockedZone), "hits, with the rules: ", br.blocked)
	fmt.Fprintf(b, "\nEach row is measured at two nxdnsd processes running beside each other, one without lists and one with the same settings "+
		"and one `[[blocking.lists]]` file of the generated rules (`||%s^` among them), loaded before it answered: "+
		"dnsperf at one, then the other, then the other way round, %d times each, two fresh processes for every pair. "+
		"The QPS and CPU columns are each side's median run; the ratio is the median of the pairs' ratios, listed in pair order. "+
		"The blocked row is measured at the process with the list alone: the hits row's load (its first columns) beside the blocked names, in turns; "+
		"the CPU columns say what a blocked name costs beside a hit under the same rules.\n",
		blockedZone, r.cfg.pairs)
	if br.refresh != nil {
		r.writeRefresh(b, br.refresh)
	}
}

// verdictBlocking is issue 27's check: the forwarding and hits rows with
// the rules at most maxBlockLoss below the same rows without, the blocked
// row at least as fast as the hits row, each by its pairs' median.
// t.blocking is not nil.
func (r *report) verdictBlocking(check func(bool, string, ...any), notChecked func(string, ...any), t *throughput) {
	br := t.blocking
	if br.fwd != nil {
		ratio := br.fwd.ratio()
		check(ratio >= 1-maxBlockLoss, "issue 27, forwarding with %s rules: %.3f of the QPS without lists >= %.2f (median of %d pairs)",
			thousands(float64(br.rules)), ratio, 1-maxBlockLoss, len(br.fwd.a))
	}
	if br.hits == nil || br.blocked == nil {
		notChecked("issue 27, hits with the rules and the blocked row against hits: no hits row")
		return
	}
	ratio := br.hits.ratio()
	check(ratio >= 1-maxBlockLoss, "issue 27, hits with %s rules: %.3f of the QPS without lists >= %.2f (median of %d pairs)",
		thousands(float64(br.rules)), ratio, 1-maxBlockLoss, len(br.hits.a))
	check(br.blocked.ratio() >= 1, "issue 27, blocked names: %.3f of the hits row's QPS >= 1 (median of %d pairs)",
		br.blocked.ratio(), len(br.blocked.a))
	if br.refresh != nil {
		r.verdictRefresh(check, notChecked, br.refresh)
	} else {
		notChecked("issue 27, the hit path's p99 during a refresh: -latency 0")
	}
}
