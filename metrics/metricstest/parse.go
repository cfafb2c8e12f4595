// Package metricstest reads the Prometheus text format (version 0.0.4)
// strictly, for tests of the metrics nxdnsd renders, and lints it the way
// Prometheus's own tooling does. The parsing is Prometheus's own
// (github.com/prometheus/common/expfmt), which refuses bad syntax, a
// second TYPE or HELP line and a TYPE after the family's samples; this
// package adds what a Prometheus server refuses beyond it (a family split
// in two, a duplicate series, a histogram without its +Inf bucket or with
// a _count that is not its +Inf bucket, a negative counter) and returns
// the families for assertions.
//
// It is an ordinary package so that every package's tests can import it;
// production code never does, so its dependencies are the tests' only.
package metricstest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one series' value.
type Sample struct {
	Name   string            // as written: a histogram's has its _bucket, _sum or _count suffix
	Labels map[string]string // never nil
	Value  float64
}

// Family is every sample of one metric family.
type Family struct {
	Name    string
	Type    string // counter, gauge, histogram, summary or untyped (no TYPE line)
	Help    string // "" when the family has no HELP text
	Samples []Sample
}

// Families maps family names to families.
type Families map[string]*Family

// Parse reads a whole exposition.
func Parse(r io.Reader) (Families, error) {
	text, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	mfs, err := parseText(text)
	if err != nil {
		return nil, err
	}
	fs := Families{}
	for name, mf := range mfs {
		f := &Family{Name: name, Type: strings.ToLower(mf.GetType().String()), Help: mf.GetHelp(), Samples: samplesOf(mf)}
		if err := checkFamily(f); err != nil {
			return nil, fmt.Errorf("family %s: %w", f.Name, err)
		}
		fs[name] = f
	}
	return fs, nil
}

// Lint parses the exposition text as Parse does and returns what
// Prometheus's linter (promlint, as promtool check metrics runs it) finds
// wrong with it, by family: a missing HELP text, a counter without
// _total, a unit that is not a base unit, and the like.
func Lint(text []byte) ([]promlint.Problem, error) {
	mfs, err := parseText(text)
	if err != nil {
		return nil, err
	}
	list := make([]*dto.MetricFamily, 0, len(mfs))
	for _, mf := range mfs {
		list = append(list, mf)
	}
	return promlint.NewWithMetricFamilies(list).Lint()
}

// parseText parses text with expfmt, with the classic (pre-UTF-8) name
// rules nxdnsd's names follow, then checks what expfmt lets through: the
// order of the families and duplicate series.
func parseText(text []byte) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, err
	}
	if err := checkOrder(text, mfs); err != nil {
		return nil, err
	}
	for name, mf := range mfs {
		seen := map[string]bool{}
		for _, m := range mf.GetMetric() {
			key := canonicalLabels(labelsOf(m))
			if seen[key] {
				return nil, fmt.Errorf("duplicate series %s{%s}", name, key)
			}
			seen[key] = true
		}
	}
	return mfs, nil
}

// checkOrder refuses a family whose lines are split by another family's:
// expfmt merges the two parts, a Prometheus server refuses the scrape.
func checkOrder(text []byte, mfs map[string]*dto.MetricFamily) error {
	var cur string
	done := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for line := 1; sc.Scan(); line++ {
		l := sc.Text()
		var name string
		if fields := strings.Fields(strings.TrimPrefix(l, "#")); strings.HasPrefix(l, "#") {
			if len(fields) < 2 || fields[0] != "HELP" && fields[0] != "TYPE" {
				continue
			}
			name = fields[1]
		} else if name = strings.TrimSpace(l); name == "" {
			continue
		} else if i := strings.IndexAny(name, "{ \t"); i >= 0 {
			name = familyOf(name[:i], cur, mfs)
		}
		if name == cur {
			continue
		}
		if done[name] {
			return fmt.Errorf("line %d: family %s appears again after other families", line, name)
		}
		if cur != "" {
			done[cur] = true
		}
		cur = name
	}
	return sc.Err()
}

// familyOf maps a sample name to its family: the current family when the
// name is one of its histogram or summary series, else the name itself.
func familyOf(name, cur string, mfs map[string]*dto.MetricFamily) string {
	mf := mfs[cur]
	if mf == nil || name == cur || !strings.HasPrefix(name, cur) {
		return name
	}
	suffixes := map[dto.MetricType][]string{
		dto.MetricType_HISTOGRAM: {"_bucket", "_sum", "_count"},
		dto.MetricType_SUMMARY:   {"_sum", "_count"},
	}[mf.GetType()]
	for _, suf := range suffixes {
		if name == cur+suf {
			return cur
		}
	}
	return name
}

// samplesOf turns a parsed family back into the samples of the text
// format, with the names and labels they were written with.
func samplesOf(mf *dto.MetricFamily) []Sample {
	name := mf.GetName()
	var out []Sample
	add := func(n string, ls map[string]string, v float64) {
		out = append(out, Sample{Name: n, Labels: ls, Value: v})
	}
	with := func(ls map[string]string, k, v string) map[string]string {
		c := make(map[string]string, len(ls)+1)
		for lk, lv := range ls {
			c[lk] = lv
		}
		c[k] = v
		return c
	}
	for _, m := range mf.GetMetric() {
		ls := labelsOf(m)
		switch {
		case m.Counter != nil:
			add(name, ls, m.GetCounter().GetValue())
		case m.Gauge != nil:
			add(name, ls, m.GetGauge().GetValue())
		case m.Untyped != nil:
			add(name, ls, m.GetUntyped().GetValue())
		case m.Histogram != nil:
			h := m.GetHistogram()
			for _, b := range h.GetBucket() {
				add(name+"_bucket", with(ls, "le", formatBound(b.GetUpperBound())), countOf(b.CumulativeCount, b.CumulativeCountFloat))
			}
			if h.SampleSum != nil {
				add(name+"_sum", ls, h.GetSampleSum())
			}
			if h.SampleCount != nil || h.SampleCountFloat != nil {
				add(name+"_count", ls, countOf(h.SampleCount, h.SampleCountFloat))
			}
		case m.Summary != nil:
			sm := m.GetSummary()
			for _, q := range sm.GetQuantile() {
				add(name, with(ls, "quantile", formatBound(q.GetQuantile())), q.GetValue())
			}
			if sm.SampleSum != nil {
				add(name+"_sum", ls, sm.GetSampleSum())
			}
			if sm.SampleCount != nil {
				add(name+"_count", ls, float64(sm.GetSampleCount()))
			}
		}
	}
	return out
}

func labelsOf(m *dto.Metric) map[string]string {
	ls := make(map[string]string, len(m.GetLabel()))
	for _, lp := range m.GetLabel() {
		ls[lp.GetName()] = lp.GetValue()
	}
	return ls
}

func countOf(i *uint64, f *float64) float64 {
	if f != nil {
		return *f
	}
	if i != nil {
		return float64(*i)
	}
	return 0
}

// formatBound writes a bucket bound or quantile as the text format does.
func formatBound(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func canonicalLabels(ls map[string]string) string {
	keys := make([]string, 0, len(ls))
	for k := range ls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q,", k, ls[k])
	}
	return b.String()
}

// checkFamily checks the rules of a typed family's sample names and, for a
// histogram, that every series has cumulative buckets ending in +Inf and a
// _count equal to its +Inf bucket.
func checkFamily(f *Family) error {
	switch f.Type {
	case "counter", "gauge", "untyped":
		for _, s := range f.Samples {
			if s.Name != f.Name {
				return fmt.Errorf("sample %s in a %s family", s.Name, f.Type)
			}
			if f.Type == "counter" && s.Value < 0 {
				return fmt.Errorf("negative counter %s", s.Name)
			}
		}
	case "histogram":
		type series struct {
			les    []float64
			counts []float64
			count  float64
			seen   bool
		}
		all := map[string]*series{}
		get := func(ls map[string]string) *series {
			c := make(map[string]string, len(ls))
			for k, v := range ls {
				if k != "le" {
					c[k] = v
				}
			}
			key := canonicalLabels(c)
			if all[key] == nil {
				all[key] = &series{}
			}
			return all[key]
		}
		for _, s := range f.Samples {
			switch s.Name {
			case f.Name + "_bucket":
				le, ok := s.Labels["le"]
				if !ok {
					return fmt.Errorf("bucket without le")
				}
				bound, err := parseValue(le)
				if err != nil {
					return fmt.Errorf("le %q: %w", le, err)
				}
				sr := get(s.Labels)
				sr.les = append(sr.les, bound)
				sr.counts = append(sr.counts, s.Value)
			case f.Name + "_count":
				sr := get(s.Labels)
				sr.count, sr.seen = s.Value, true
			case f.Name + "_sum":
			default:
				return fmt.Errorf("sample %s in a histogram", s.Name)
			}
		}
		for key, sr := range all {
			n := len(sr.les)
			if n == 0 || !math.IsInf(sr.les[n-1], 1) {
				return fmt.Errorf("series {%s}: no +Inf bucket last", key)
			}
			for i := 1; i < n; i++ {
				if sr.les[i] <= sr.les[i-1] || sr.counts[i] < sr.counts[i-1] {
					return fmt.Errorf("series {%s}: buckets not cumulative", key)
				}
			}
			if sr.seen && sr.count != sr.counts[n-1] {
				return fmt.Errorf("series {%s}: _count %v, +Inf bucket %v", key, sr.count, sr.counts[n-1])
			}
		}
	}
	return nil
}

// Value returns the value of the sample named name whose labels include
// every pair of labels (given as name, value, name, value...), and whether
// exactly one such sample exists.
func (fs Families) Value(name string, labels ...string) (float64, bool) {
	var found []float64
	for _, f := range fs {
		for _, s := range f.Samples {
			if s.Name == name && hasLabels(s.Labels, labels) {
				found = append(found, s.Value)
			}
		}
	}
	if len(found) != 1 {
		return 0, false
	}
	return found[0], true
}

func hasLabels(ls map[string]string, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if v, ok := ls[pairs[i]]; !ok || v != pairs[i+1] {
			return false
		}
	}
	return true
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	}
	return strconv.ParseFloat(s, 64)
}
