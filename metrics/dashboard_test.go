package metrics

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
)

// The Grafana dashboard (deploy/grafana/nxdnsd.json) queries only the
// families nxdnsd writes (spec section 7): a renamed metric cannot leave
// a panel silently empty. Mutation check: renaming nxdns_upstream_backoff
// in the spec table, or a typo in a panel's query, fails it.
func TestDashboardQueriesTheSpecFamilies(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "deploy", "grafana", "nxdnsd.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, f := range metricstest.Spec {
		known[f.Name] = true
		if f.Type == "histogram" {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				known[f.Name+suf] = true
			}
		}
	}
	name := regexp.MustCompile(`\bnxdns_[a-z_]+`)
	used := map[string]bool{}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			if strings.Count(tg.Expr, "(") != strings.Count(tg.Expr, ")") || strings.Count(tg.Expr, "{") != strings.Count(tg.Expr, "}") {
				t.Errorf("%s: unbalanced query %q", p.Title, tg.Expr)
			}
			for _, n := range name.FindAllString(tg.Expr, -1) {
				used[n] = true
				if !known[n] {
					t.Errorf("%s: queries %s, which nxdnsd does not write", p.Title, n)
				}
			}
		}
	}
	for _, want := range []string{"nxdns_queries_total", "nxdns_query_duration_seconds_bucket", "nxdns_upstream_attempts_total",
		"nxdns_upstream_backoff", "nxdns_upstream_budget_exhausted_total", "nxdns_cache_lookups_total"} {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
}
