package blocking

import (
	"io"
	"strconv"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/internal/promtext"
)

// The metric families of spec section 11, written by WritePrometheus with
// HELP and TYPE lines of their own, so the daemon mounts them with one
// call (the metrics library's Set.RegisterMetricsWriter). The counters
// live in the lists (listMetrics) and outlive their copies and reloads.
const (
	blockedFamily = "nxdns_blocked_total"
	blockedHelp   = "Client queries answered blocked, by the list whose rule blocked them (\"rule\" for the custom rules), CNAME inspection included."
	rulesFamily   = "nxdns_blocking_rules"
	rulesHelp     = "Rules in force in each list (distinct names and regular expressions; 0 while loading)."
	fetchFamily   = "nxdns_blocking_list_fetches_total"
	fetchHelp     = "Fetches (or reads, for a file) of each list by result: updated (a new copy in force), unchanged (HTTP 304), failed (the copy in force stayed)."
	ageFamily     = "nxdns_blocking_list_age_seconds"
	ageHelp       = "Age of each list's copy in force: since it was fetched or a 304 confirmed it; 0 while no copy is loaded."
)

// WritePrometheus writes the blocking families in the Prometheus text
// format: a series per enabled list (and "rule" for the custom rules in
// the per-list families that count rules and blocks), every one from
// start-up.
func (m *Manager) WritePrometheus(w io.Writer) {
	type row struct {
		name                        string
		lm                          *listMetrics
		rules                       int
		age                         float64
		blocked, upd, unchanged, fl uint64
	}
	m.mu.Lock()
	now := m.now()
	var rows []row
	for _, l := range m.lists {
		if l.state == StateDisabled {
			continue
		}
		r := row{name: l.cfg.Name, lm: l.m}
		if l.set != nil {
			r.rules = l.set.rules
			r.age = max(now.Sub(l.updatedAt), 0).Seconds()
		}
		rows = append(rows, r)
	}
	custom := m.metricsFor(config.ReservedListName)
	customRules := 0
	if m.custom.set != nil {
		customRules = m.custom.set.rules
	}
	m.mu.Unlock()

	var b []byte
	b = promtext.AppendHelp(b, blockedFamily, blockedHelp, "counter")
	for _, r := range rows {
		b = appendSample(b, blockedFamily, r.name, "", float64(r.lm.blocked.Load()))
	}
	b = appendSample(b, blockedFamily, config.ReservedListName, "", float64(custom.blocked.Load()))
	b = promtext.AppendHelp(b, rulesFamily, rulesHelp, "gauge")
	for _, r := range rows {
		b = appendSample(b, rulesFamily, r.name, "", float64(r.rules))
	}
	b = appendSample(b, rulesFamily, config.ReservedListName, "", float64(customRules))
	b = promtext.AppendHelp(b, fetchFamily, fetchHelp, "counter")
	for _, r := range rows {
		b = appendSample(b, fetchFamily, r.name, "updated", float64(r.lm.updated.Load()))
		b = appendSample(b, fetchFamily, r.name, "unchanged", float64(r.lm.unchanged.Load()))
		b = appendSample(b, fetchFamily, r.name, "failed", float64(r.lm.failed.Load()))
	}
	b = promtext.AppendHelp(b, ageFamily, ageHelp, "gauge")
	for _, r := range rows {
		b = appendSample(b, ageFamily, r.name, "", r.age)
	}
	_, _ = w.Write(b) // a failed write is the scraper's problem
}

func appendSample(b []byte, family, list, result string, v float64) []byte {
	b = append(b, family...)
	b = append(b, `{list="`...)
	b = append(b, promtext.Escape(list)...)
	if result != "" {
		b = append(b, `",result="`...)
		b = append(b, result...)
	}
	b = append(b, `"} `...)
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	return append(b, '\n')
}
