// Package metricstest reads the Prometheus text format (version 0.0.4)
// strictly, for tests of the metrics nxdnsd renders: it refuses what a
// Prometheus server would refuse (a family split in two, a second TYPE
// line, a TYPE after the family's samples, a duplicate series, a histogram
// without its +Inf bucket) and returns the families for assertions.
//
// It is an ordinary package so that every package's tests can import it;
// production code never does.
package metricstest

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
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
	Samples []Sample
}

// Families maps family names to families.
type Families map[string]*Family

// Parse reads a whole exposition. The error names the line at fault.
func Parse(r io.Reader) (Families, error) {
	p := parser{fams: Families{}, done: map[string]bool{}, series: map[string]bool{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		p.line++
		if err := p.parseLine(sc.Text()); err != nil {
			return nil, fmt.Errorf("line %d: %w: %q", p.line, err, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, f := range p.fams {
		if err := checkFamily(f); err != nil {
			return nil, fmt.Errorf("family %s: %w", f.Name, err)
		}
	}
	return p.fams, nil
}

type parser struct {
	line   int
	fams   Families
	cur    string          // the family being read
	done   map[string]bool // families closed by another family's line
	series map[string]bool // name and labels of every sample, for duplicates
}

// enter makes name the current family, refusing one that was closed.
func (p *parser) enter(name string) (*Family, error) {
	if name != p.cur {
		if p.done[name] {
			return nil, fmt.Errorf("family %s appears again after other families", name)
		}
		if p.cur != "" {
			p.done[p.cur] = true
		}
		p.cur = name
	}
	f := p.fams[name]
	if f == nil {
		f = &Family{Name: name, Type: "untyped"}
		p.fams[name] = f
	}
	return f, nil
}

func (p *parser) parseLine(l string) error {
	switch {
	case strings.TrimSpace(l) == "":
		return nil
	case strings.HasPrefix(l, "#"):
		fields := strings.Fields(strings.TrimPrefix(l, "#"))
		if len(fields) < 2 || fields[0] != "HELP" && fields[0] != "TYPE" {
			return nil // an ordinary comment
		}
		if !validName(fields[1], true) {
			return fmt.Errorf("bad metric name %q", fields[1])
		}
		f, err := p.enter(fields[1])
		if err != nil {
			return err
		}
		if fields[0] == "HELP" {
			return nil
		}
		if len(fields) != 3 {
			return fmt.Errorf("TYPE needs a name and a type")
		}
		switch {
		case len(f.Samples) > 0:
			return fmt.Errorf("TYPE after samples of %s", f.Name)
		case f.Type != "untyped":
			return fmt.Errorf("second TYPE for %s", f.Name)
		case !slices.Contains([]string{"counter", "gauge", "histogram", "summary", "untyped"}, fields[2]):
			return fmt.Errorf("unknown type %q", fields[2])
		}
		f.Type = fields[2]
		return nil
	}
	s, err := parseSample(l)
	if err != nil {
		return err
	}
	key := s.Name + "{" + canonicalLabels(s.Labels) + "}"
	if p.series[key] {
		return fmt.Errorf("duplicate series %s", key)
	}
	p.series[key] = true
	f, err := p.enter(p.familyOf(s.Name))
	if err != nil {
		return err
	}
	f.Samples = append(f.Samples, s)
	return nil
}

// familyOf maps a sample name to its family: the current family when the
// name is one of its histogram or summary series, else the name itself.
func (p *parser) familyOf(name string) string {
	if f := p.fams[p.cur]; f != nil && name != f.Name {
		switch f.Type {
		case "histogram":
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if name == f.Name+suf {
					return f.Name
				}
			}
		case "summary":
			for _, suf := range []string{"_sum", "_count"} {
				if name == f.Name+suf {
					return f.Name
				}
			}
		}
	}
	return name
}

func parseSample(l string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(l, "{ \t")
	if i < 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name, l = l[:i], l[i:]
	if !validName(s.Name, true) {
		return s, fmt.Errorf("bad metric name %q", s.Name)
	}
	if strings.HasPrefix(l, "{") {
		rest, err := parseLabels(l[1:], s.Labels)
		if err != nil {
			return s, err
		}
		l = rest
	}
	fields := strings.Fields(l)
	if len(fields) < 1 || len(fields) > 2 {
		return s, fmt.Errorf("want a value and an optional timestamp")
	}
	v, err := parseValue(fields[0])
	if err != nil {
		return s, err
	}
	s.Value = v
	if len(fields) == 2 {
		if _, err := strconv.ParseInt(fields[1], 10, 64); err != nil {
			return s, fmt.Errorf("bad timestamp %q", fields[1])
		}
	}
	return s, nil
}

// parseLabels reads `name="value",...}` and returns what follows the brace.
func parseLabels(l string, into map[string]string) (string, error) {
	for {
		l = strings.TrimLeft(l, " \t")
		if strings.HasPrefix(l, "}") {
			return l[1:], nil
		}
		eq := strings.IndexByte(l, '=')
		if eq < 0 {
			return "", fmt.Errorf("label without =")
		}
		name := strings.TrimSpace(l[:eq])
		if !validName(name, false) {
			return "", fmt.Errorf("bad label name %q", name)
		}
		l = strings.TrimLeft(l[eq+1:], " \t")
		if !strings.HasPrefix(l, `"`) {
			return "", fmt.Errorf("label %s: value not quoted", name)
		}
		var v strings.Builder
		j := 1
		for ; j < len(l) && l[j] != '"'; j++ {
			if l[j] != '\\' {
				v.WriteByte(l[j])
				continue
			}
			j++
			if j == len(l) {
				break
			}
			switch l[j] {
			case '\\', '"':
				v.WriteByte(l[j])
			case 'n':
				v.WriteByte('\n')
			default:
				return "", fmt.Errorf("label %s: bad escape \\%c", name, l[j])
			}
		}
		if j >= len(l) {
			return "", fmt.Errorf("label %s: unterminated value", name)
		}
		if _, dup := into[name]; dup {
			return "", fmt.Errorf("label %s twice", name)
		}
		into[name] = v.String()
		l = strings.TrimLeft(l[j+1:], " \t")
		switch {
		case strings.HasPrefix(l, ","):
			l = l[1:]
		case strings.HasPrefix(l, "}"):
		default:
			return "", fmt.Errorf("after label %s: want , or }", name)
		}
	}
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("bad value %q", s)
	}
	return v, nil
}

func validName(s string, metric bool) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		ok := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' || metric && c == ':'
		if !ok {
			return false
		}
	}
	return true
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
