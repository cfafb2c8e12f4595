package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
)

// Rows measured side by side (-pairs N): a row's load run N times at each
// of two nxdnsd processes that run beside each other, one without the
// feature a row is about (a) and one with it (b), in turns — a then b,
// then b then a, and so on — so that a drift of the shared machine over
// the run falls on both alike. The figure is the median of the N pairs'
// ratios, b's QPS over a's. One run at each, minutes apart, swings by
// ±10 % on a 2-core machine with neighbours; the pairs' median is what
// the issues' 5 % bounds can be judged by.

// pairRuns are one row's runs side by side: a[i] and b[i] are pair i.
type pairRuns struct {
	a, b []*fwdRun
}

// side is one process of a pair and its query file.
type side struct {
	nx      *child
	queries string
}

// measurePairs runs n pairs of the load at a and b (see above), saying
// each run's name with label and what it measures.
func measurePairs(ctx context.Context, c runConfig, n int, a, b side, upstream func() uint64,
	progress func(string, ...any), label string) (*pairRuns, error) {
	p := &pairRuns{a: make([]*fwdRun, n), b: make([]*fwdRun, n)}
	for i := range n {
		order := []struct {
			s    side
			runs []*fwdRun
			name string
		}{{a, p.a, "a"}, {b, p.b, "b"}}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, o := range order {
			progress("%s, pair %d of %d, %s: dnsperf %s -> nxdnsd %s", label, i+1, n, o.name, c.perf, o.s.nx.addr)
			r, err := measure(ctx, c, o.s.nx, o.s.nx.addr, o.s.queries, upstream, nil)
			if err != nil {
				return nil, err
			}
			o.runs[i] = r
		}
	}
	return p, nil
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
