package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/fake"
)

// The rows against a base (-against REV): the forwarding and hits rows
// side by side (pairs.go) at an nxdnsd built from git revision REV (a)
// and the nxdnsd under test (b), with the same settings and against the
// same fakes, so that a change to the query path is judged beside the
// code it changed in one run, not against figures of another day. The
// verdict asks what issue 26 asks of a refactoring: QPS, CPU per query
// and allocations per query no worse, within the pairs' noise.

// againstNoise is how far the pairs' median may stray before a row is
// worse: the spread of the medians of paired runs on this machine.
const againstNoise = 0.05

// againstAllocSlack is how many more heap allocations per query than the
// base count as the same: a /metrics scrape's share, rounded up.
const againstAllocSlack = 0.02

// againstRuns are the rows against the base: each nil when not measured.
type againstRuns struct {
	rev, commit string // the base as given, and its short commit
	fwd, hits   *pairRuns
}

// measureAgainst builds the base and runs its rows after the others. The
// base's configuration has [history] only if the base knows it.
func measureAgainst(ctx context.Context, c runConfig, dir string, t *throughput, primary, secondary *fake.Server,
	upstream func() uint64, progress func(string, ...any)) (*againstRuns, error) {
	ar := &againstRuns{rev: c.against, commit: command(ctx, "git", "rev-parse", "--short", c.against)}
	baseDir := filepath.Join(dir, "against")
	if err := os.Mkdir(baseDir, 0o755); err != nil {
		return nil, err
	}
	progress("building nxdnsd %s, the base of the rows against it", c.against)
	baseBin, err := buildNxdnsd(ctx, baseDir, c.against)
	if err != nil {
		return nil, err
	}
	base := c
	base.nxdnsd = baseBin
	if base.historyKnown, err = probeHistory(ctx, baseBin, baseDir); err != nil {
		return nil, err
	}
	// beside are a pair's processes: the base's and the one under test,
	// the same settings but for their ports.
	beside := func(name, queries string, cache bool) pairProcs {
		return func(i int) (a, b *child, stop func(), err error) {
			start := func(rc runConfig, side string) (*child, error) {
				conf, err := rc.nxdnsdConf(primary, secondary, 32, "")
				if err != nil {
					return nil, err
				}
				conf.Cache = t.cache.enabled(cache)
				return startChild(ctx, rc.nxdnsd, dir, fmt.Sprintf("%s-%s-%d", name, side, i+1), conf)
			}
			return startPair(ctx, c, queries,
				func() (*child, error) { return start(base, "base") },
				func() (*child, error) { return start(c, "this") })
		}
	}
	queries := filepath.Join(dir, "queries.txt")
	label := fmt.Sprintf("forwarding, a: nxdnsd %s, b: the nxdnsd under test", ar.commit)
	if ar.fwd, err = measurePairs(ctx, c, c.pairs, beside("against-fwd", queries, c.forwardCache), queries, queries, upstream, progress, label); err != nil {
		return nil, err
	}
	if t.hits == nil || t.hits.nx == nil {
		return ar, nil // no cache: no hits row
	}
	hits := filepath.Join(dir, "hits.txt")
	label = fmt.Sprintf("hits, a: nxdnsd %s, b: the nxdnsd under test", ar.commit)
	if ar.hits, err = measurePairs(ctx, c, c.pairs, beside("against-hits", hits, true), hits, hits, upstream, progress, label); err != nil {
		return nil, err
	}
	return ar, nil
}

// writeAgainst is the table of the rows against the base.
func (r *report) writeAgainst(b *strings.Builder, ar *againstRuns) {
	fmt.Fprintf(b, "\n### Against %s (%s), side by side, dnsperf %s, UDP\n\n", ar.rev, ar.commit, r.cfg.perf)
	fmt.Fprintf(b, "| row | base: QPS | CPU per query | allocs per query | this: QPS | CPU per query | allocs per query | this / base: median (the pairs) | CPU per query, this / base |\n")
	fmt.Fprintf(b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, row := range []struct {
		name string
		p    *pairRuns
	}{{"forwarding: " + thousands(float64(r.cfg.names)) + " names, no cache", ar.fwd}, {"hits: " + thousands(float64(r.cfg.hitNames)) + " names over and over", ar.hits}} {
		if row.p == nil {
			fmt.Fprintf(b, "| %s | – | – | – | – | – | – | – | – |\n", row.name)
			continue
		}
		a, t := row.p.medianA(), row.p.medianB()
		cpuRatio := "?"
		if ca, cb, ok := row.p.cpuPerQuery(); ok {
			cpuRatio = fmt.Sprintf("%.3f", cb/ca)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %.3f (%s) | %s |\n", row.name,
			thousands(a.perf.QPS), usPerQuery(a), allocsText(a), thousands(t.perf.QPS), usPerQuery(t), allocsText(t),
			row.p.ratio(), row.p.ratiosText(), cpuRatio)
	}
	fmt.Fprintf(b, "\nEach row runs at two fresh nxdnsd processes beside each other for every pair, one built from %s (base) and the one under test (this), "+
		"with the same settings: dnsperf at one, then the other, then the other way round, -pairs times each. "+
		"QPS and allocations are each side's median run; the CPU ratio is over every run of each side (CPU time over queries answered).\n", ar.rev)
}

// verdictAgainst checks the rows against the base: issue 26's hot path
// kept, within the pairs' noise.
func (r *report) verdictAgainst(check func(bool, string, ...any), notChecked func(string, ...any), ar *againstRuns) {
	for _, row := range []struct {
		name string
		p    *pairRuns
	}{{"forwarding", ar.fwd}, {"hits", ar.hits}} {
		if row.p == nil {
			notChecked("against %s, %s: no such row (no cache)", ar.commit, row.name)
			continue
		}
		check(row.p.ratio() >= 1-againstNoise, "against %s, %s: QPS %.3f of the base's >= %.2f", ar.commit, row.name, row.p.ratio(), 1-againstNoise)
		if ca, cb, ok := row.p.cpuPerQuery(); ok {
			check(cb <= ca*(1+againstNoise), "against %s, %s: CPU per query %.1f µs <= the base's %.1f µs + %.0f %%", ar.commit, row.name, cb, ca, againstNoise*100)
		}
		a, t := row.p.medianA(), row.p.medianB()
		if a.allocsPerQuery >= 0 && t.allocsPerQuery >= 0 {
			check(t.allocsPerQuery <= a.allocsPerQuery+againstAllocSlack, "against %s, %s: heap allocations per query %.2f <= the base's %.2f + %.2f",
				ar.commit, row.name, t.allocsPerQuery, a.allocsPerQuery, againstAllocSlack)
		}
	}
}

// cpuPerQuery is the CPU per query of every run of a and of b (CPU time
// over queries answered), in µs; ok is false when a figure is missing.
func (p *pairRuns) cpuPerQuery() (a, b float64, ok bool) {
	total := func(runs []*fwdRun) (float64, bool) {
		var cpu time.Duration
		completed := 0
		for _, r := range runs {
			if r.cpu <= 0 {
				return 0, false
			}
			cpu, completed = cpu+r.cpu, completed+r.perf.Completed
		}
		if completed == 0 {
			return 0, false
		}
		return perQueryUS(cpu, completed), true
	}
	a, okA := total(p.a)
	b, okB := total(p.b)
	return a, b, okA && okB
}

// allocsText formats a run's heap allocations per query: "1.01", or "?".
func allocsText(r *fwdRun) string {
	if r.allocsPerQuery < 0 {
		return "?"
	}
	return fmt.Sprintf("%.2f", r.allocsPerQuery)
}
