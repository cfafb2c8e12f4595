package metricstest

import (
	"errors"
	"fmt"
	"slices"
	"sort"
)

// SpecFamily is one row of spec section 7.
type SpecFamily struct {
	Name     string
	Type     string
	Labels   []string // sorted; a histogram's le not included
	Upstream bool     // one series (or histogram) per configured upstream
}

// Spec is the table of spec section 7, the contract outside tests read.
var Spec = []SpecFamily{
	{Name: "nxdns_queries_total", Type: "counter", Labels: []string{"proto", "rcode"}},
	{Name: "nxdns_query_duration_seconds", Type: "histogram"},
	{Name: "nxdns_upstream_success_total", Type: "counter", Labels: []string{"upstream"}, Upstream: true},
	{Name: "nxdns_upstream_failure_total", Type: "counter", Labels: []string{"upstream"}, Upstream: true},
	{Name: "nxdns_upstream_in_flight", Type: "gauge", Labels: []string{"upstream"}, Upstream: true},
	{Name: "nxdns_upstream_slots", Type: "gauge", Labels: []string{"upstream"}, Upstream: true},
	{Name: "nxdns_upstream_backoff", Type: "gauge", Labels: []string{"upstream"}, Upstream: true},
	{Name: "nxdns_upstream_attempt_duration_seconds", Type: "histogram", Labels: []string{"upstream"}, Upstream: true},
	{Name: "nxdns_upstream_attempts_total", Type: "counter", Labels: []string{"outcome", "upstream"}, Upstream: true},
	{Name: "nxdns_upstream_queued_total", Type: "counter"},
	{Name: "nxdns_upstream_queued_seconds_total", Type: "counter"},
	{Name: "nxdns_upstream_budget_exhausted_total", Type: "counter"},
	{Name: "nxdns_forward_zone_queries_total", Type: "counter", Labels: []string{"outcome", "zone"}},
	{Name: "nxdns_query_log_dropped_total", Type: "counter"},
	{Name: "nxdns_overload_refused_total", Type: "counter"},
	{Name: "nxdns_acl_refused_total", Type: "counter"},
	{Name: "nxdns_panics_total", Type: "counter"},
	{Name: "nxdns_rebind_stripped_total", Type: "counter"},
	{Name: "nxdns_cache_lookups_total", Type: "counter", Labels: []string{"result"}},
	{Name: "nxdns_cache_entries", Type: "gauge"},
	{Name: "nxdns_cache_bytes", Type: "gauge"},
	{Name: "nxdns_cache_evictions_total", Type: "counter"},
	{Name: "nxdns_cache_prefetches_total", Type: "counter", Labels: []string{"outcome"}},
	{Name: "nxdns_config_reloads_total", Type: "counter", Labels: []string{"result"}},
	{Name: "nxdns_upstream_probes_total", Type: "counter", Labels: []string{"outcome", "upstream"}, Upstream: true},
	{Name: "nxdns_upstream_srtt_seconds", Type: "gauge", Labels: []string{"upstream"}, Upstream: true},
	{Name: "nxdns_build_info", Type: "gauge", Labels: []string{"goversion", "version"}},
}

// perOutcome are the families with one series per upstream and attempt
// outcome.
var perOutcome = []string{"nxdns_upstream_attempts_total", "nxdns_upstream_probes_total"}

// AttemptOutcomes are the outcome label values of
// nxdns_upstream_attempts_total and nxdns_upstream_probes_total, in the
// spec's order.
var AttemptOutcomes = []string{"answer", "expired", "censored", "peer_fault", "local_error", "canceled"}

// CheckSpec reports every way fs departs from Spec for a daemon with these
// upstreams and forward zones: a family missing (the forward-zone family
// exists only with a zone) or of another type, a
// sample with other label names, an upstream (or, for the attempts, an
// upstream and outcome) without its series, a zone without its series.
func CheckSpec(fs Families, upstreams, zones []string) error {
	var errs []error
	for _, want := range Spec {
		f := fs[want.Name]
		if f == nil && want.Name == "nxdns_forward_zone_queries_total" && len(zones) == 0 {
			continue // its series are per configured zone
		}
		if f == nil {
			errs = append(errs, fmt.Errorf("%s: missing", want.Name))
			continue
		}
		if f.Type != want.Type {
			errs = append(errs, fmt.Errorf("%s: type %s, want %s", want.Name, f.Type, want.Type))
		}
		perUpstream := map[string]int{}
		for _, s := range f.Samples {
			if got := labelNames(s.Labels); !slices.Equal(got, want.Labels) {
				errs = append(errs, fmt.Errorf("%s: labels %v, want %v", s.Name, got, want.Labels))
			}
			if want.Upstream && s.Name == sampleName(want) {
				perUpstream[s.Labels["upstream"]]++
			}
		}
		if len(f.Samples) == 0 {
			errs = append(errs, fmt.Errorf("%s: no series", want.Name))
		}
		if !want.Upstream {
			continue
		}
		per := 1
		if slices.Contains(perOutcome, want.Name) {
			per = len(AttemptOutcomes)
		}
		for _, u := range upstreams {
			if perUpstream[u] != per {
				errs = append(errs, fmt.Errorf("%s: %d series for upstream %q, want %d", want.Name, perUpstream[u], u, per))
			}
		}
	}
	for _, family := range perOutcome {
		for _, u := range upstreams {
			for _, o := range AttemptOutcomes {
				if _, ok := fs.Value(family, "upstream", u, "outcome", o); !ok {
					errs = append(errs, fmt.Errorf("%s{upstream=%q,outcome=%q}: missing", family, u, o))
				}
			}
		}
	}
	for _, z := range zones {
		for _, o := range []string{"answer", "timeout", "error"} {
			if _, ok := fs.Value("nxdns_forward_zone_queries_total", "zone", z, "outcome", o); !ok {
				errs = append(errs, fmt.Errorf("nxdns_forward_zone_queries_total{zone=%q,outcome=%q}: missing", z, o))
			}
		}
	}
	return errors.Join(errs...)
}

// sampleName is the sample that stands for one series of a family: the
// family itself, or a histogram's _count.
func sampleName(f SpecFamily) string {
	if f.Type == "histogram" {
		return f.Name + "_count"
	}
	return f.Name
}

func labelNames(ls map[string]string) []string {
	var out []string
	for k := range ls {
		if k != "le" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
