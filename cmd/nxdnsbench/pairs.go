package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Rows measured side by side (-pairs N): a row's load run N times at each
// of two nxdnsd processes that run beside each other, one without the
// feature a row is about (a) and one with it (b), in turns — a then b,
// then b then a, and so on, two fresh processes for every pair — so
// that a drift of the shared machine over the run falls on both alike. The figure is the median of the N pairs'
// ratios, b's QPS over a's. One run at each, minutes apart, swings by
// ±10 % on a 2-core machine with neighbours; the pairs' median is what
// the issues' 5 % bounds can be judged by.

// pairRuns are one row's runs side by side: a[i] and b[i] are pair i.
type pairRuns struct {
	a, b []*fwdRun
}

// pairProcs starts pair i's processes: a and b, or one process for both
// when a row compares two loads at one process. Each pair has its own:
// two processes of one binary and one configuration differ by up to 5 %
// for as long as they run (where the kernel and the scheduler put their
// sockets and threads), and fresh ones for every pair spread that
// difference over the pairs instead of leaving it in each. procs warms
// them up (warmUp) before it returns; stop ends what it started, once
// the pair is measured.
type pairProcs func(i int) (a, b *child, stop func(), err error)

// startPair starts a pair's two processes with startA and startB and
// warms them up with queries; stop ends both. A failure stops what was
// started.
func startPair(ctx context.Context, c runConfig, queries string, startA, startB func() (*child, error)) (a, b *child, stop func(), err error) {
	if a, err = startA(); err != nil {
		return nil, nil, nil, err
	}
	if b, err = startB(); err != nil {
		a.stop()
		return nil, nil, nil, err
	}
	stop = func() { a.stop(); b.stop() }
	if err := warmUp(ctx, c, queries, a, b); err != nil {
		stop()
		return nil, nil, nil, err
	}
	return a, b, stop, nil
}

// warmUpLength is how long warmUp runs dnsperf at a fresh process.
const warmUpLength = time.Second

// warmUp runs dnsperf for warmUpLength at each of nxs with the query
// file queries, and forgets the figures: a fresh process's first second
// (its heap and threads growing, a cache filling, the history's writer
// starting) is no part of a pair's runs.
func warmUp(ctx context.Context, c runConfig, queries string, nxs ...*child) error {
	p := c.perf
	p.Duration = min(p.Duration, warmUpLength)
	for _, nx := range nxs {
		if _, err := runDNSPerf(ctx, c.dnsperf, queries, nx.addr, p); err != nil {
			return fmt.Errorf("warming %s up: %w", nx.name, err)
		}
	}
	return nil
}

// measurePairs runs n pairs of the load, qa at a and qb at b (see above),
// with pair i's processes from procs, saying each run's name with label
// and what it measures.
func measurePairs(ctx context.Context, c runConfig, n int, procs pairProcs, qa, qb string, upstream func() uint64,
	progress func(string, ...any), label string) (*pairRuns, error) {
	p := &pairRuns{a: make([]*fwdRun, n), b: make([]*fwdRun, n)}
	for i := range n {
		if err := p.measurePair(ctx, c, i, n, procs, qa, qb, upstream, progress, label); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// measurePair runs pair i of n: a then b, or b then a when i is odd.
func (p *pairRuns) measurePair(ctx context.Context, c runConfig, i, n int, procs pairProcs, qa, qb string, upstream func() uint64,
	progress func(string, ...any), label string) error {
	a, b, stop, err := procs(i)
	if err != nil {
		return err
	}
	defer stop()
	order := []struct {
		nx      *child
		queries string
		runs    []*fwdRun
		name    string
	}{{a, qa, p.a, "a"}, {b, qb, p.b, "b"}}
	if i%2 == 1 {
		order[0], order[1] = order[1], order[0]
	}
	for _, o := range order {
		progress("%s, pair %d of %d, %s: dnsperf %s -> nxdnsd %s", label, i+1, n, o.name, c.perf, o.nx.addr)
		r, err := measure(ctx, c, o.nx, o.nx.addr, o.queries, upstream, nil)
		if err != nil {
			return err
		}
		o.runs[i] = r
	}
	return nil
}

// ratios are the pairs' QPS ratios, b over a, in pair order.
func (p *pairRuns) ratios() []float64 {
	out := make([]float64, len(p.a))
	for i := range p.a {
		out[i] = p.b[i].perf.QPS / p.a[i].perf.QPS
	}
	return out
}

// ratio is the median of the pairs' ratios.
func (p *pairRuns) ratio() float64 { return median(p.ratios()) }

// medianA and medianB are the run of a (b) with the median QPS: the one
// the row's QPS and CPU per query columns show.
func (p *pairRuns) medianA() *fwdRun { return medianRun(p.a) }
func (p *pairRuns) medianB() *fwdRun { return medianRun(p.b) }

// medianRun is the run of runs with the median QPS (the upper one of an
// even count).
func medianRun(runs []*fwdRun) *fwdRun {
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(x, y *fwdRun) int { return cmp.Compare(x.perf.QPS, y.perf.QPS) })
	return sorted[len(sorted)/2]
}

// median is the median of xs (the mean of the middle two of an even
// count); xs is not empty.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// ratiosText is the pairs' ratios as the report lists them: "0.97, 1.01, 0.99".
func (p *pairRuns) ratiosText() string {
	parts := make([]string, 0, len(p.a))
	for _, r := range p.ratios() {
		parts = append(parts, fmt.Sprintf("%.3f", r))
	}
	return strings.Join(parts, ", ")
}
