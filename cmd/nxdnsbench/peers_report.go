package main

import (
	"fmt"
	"strings"
	"time"
)

// writePeersBlocking is the blocking run's table: a row per server, the
// ceilings first.
func (r *report) writePeersBlocking(b *strings.Builder, pr *peersRuns) {
	fmt.Fprintf(b, "\n### Blocking beside dnsmasq, Unbound and CoreDNS: %s names blocked, dnsperf %s, UDP\n\n", thousands(float64(pr.names)), r.cfg.perf)
	fmt.Fprintf(b, "| server | RSS, no list | RSS at the first blocked answer | peak RSS loading | start → first blocked answer "+
		"| (a) blocked: QPS (ratio) | CPU per query | (b) hits: QPS (ratio) | CPU per query | (c) forwarding, caches off: QPS (ratio) | CPU per query |\n")
	fmt.Fprintf(b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	cell := func(x, ceiling *fwdRun) string {
		if x == nil {
			return "– | –"
		}
		lost := ""
		if x.perf.Lost > 0 {
			lost = fmt.Sprintf(", %s lost", thousands(float64(x.perf.Lost)))
		}
		return fmt.Sprintf("%s (%.2f%s) | %s", thousands(x.perf.QPS), x.perf.QPS/ceiling.perf.QPS, lost, usPerQuery(x))
	}
	fmt.Fprintf(b, "| ceiling: dnsperf at the fake | – | – | – | – | %s | %s | %s |\n",
		cell(pr.ceilBlocked, pr.ceilBlocked), cell(pr.ceilHits, pr.ceilHits), cell(pr.ceilFwd, pr.ceilFwd))
	var notes []string
	for _, row := range pr.rows {
		if row.rssBefore == 0 && row.fwd == nil {
			fmt.Fprintf(b, "| %s | not measured | – | – | – | – | – | – | – | – | – |\n", row.name)
			notes = append(notes, fmt.Sprintf("%s: %s", row.name, row.skip))
			continue
		}
		rss := func(n int64) string {
			if n == 0 {
				return "–"
			}
			return mib(n)
		}
		load := "–"
		if row.load > 0 {
			load = seconds3(row.load)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", row.name, rss(row.rssBefore), rss(row.rssList), rss(row.hwmList), load,
			cell(row.blocked, pr.ceilBlocked), cell(row.hits, pr.ceilHits), cell(row.fwd, pr.ceilFwd))
		if row.skip != "" {
			notes = append(notes, fmt.Sprintf("%s, not every part measured: %s", row.name, row.skip))
		}
	}
	var upstream []string
	for _, row := range pr.rows {
		if row.blocked != nil {
			upstream = append(upstream, fmt.Sprintf("%s %d", row.name, row.blocked.upstream))
		}
	}
	fmt.Fprintf(b, "\nEach server in turn, alone with dnsperf and the in-process fakes, started three times: without the list (RSS once it forwards), "+
		"with the list and its caches off (the time from its start to its first blocked answer, polled every %v; its RSS then, VmRSS and VmHWM; then (c)), "+
		"with the list and its caches on ((b), then (a)); the last two starts again in each later round (%d in all), every server in turn, "+
		"and (a), (b) and (c) are each server's run of median QPS over the rounds (every round's below). Ratios are to the ceiling of the same query file (queries dnsperf gave up on, after its 5 s timeout, follow as lost), dnsperf straight at the fake, "+
		"measured at the start of this run; CPU per query is the server's own user and system time (/proc/PID/stat, every thread) "+
		"over the queries dnsperf completed (the ceiling's: the fake's). (a) asks the list's names in the order generated, (b) the hits rows' %s names, "+
		"(c) the throughput rows' %s names. Queries of (a) that reached the fakes: %s.\n",
		loadPoll, r.cfg.peers.rounds, thousands(float64(r.cfg.hitNames)), thousands(float64(r.cfg.names)), strings.Join(upstream, ", "))
	if r.cfg.peers.rounds > 1 {
		b.WriteString("\nThe rounds, QPS in order (a) blocked; (b) hits; (c) forwarding:\n\n")
		for _, row := range pr.rows {
			if row.blocked == nil {
				continue
			}
			qps := func(runs []*fwdRun) string {
				var out []string
				for _, x := range runs {
					out = append(out, thousands(x.perf.QPS))
				}
				return strings.Join(out, ", ")
			}
			fmt.Fprintf(b, "- %s: (a) %s; (b) %s; (c) %s\n", row.name, qps(row.blockedRuns), qps(row.hitsRuns), qps(row.fwdRuns))
		}
	}
	b.WriteString("\nConfigurations (written by `cmd/nxdnsbench`, peers_conf.go; `-keep` keeps them): " +
		"nxdnsd, the shipped defaults with the list as one `[[blocking.lists]]` file of `0.0.0.0 name` lines (answer `null`), `[cache] enabled` as the row needs, " +
		"`[history] enabled = false`, or `true` with `path` a fresh SQLite file in the work directory; " +
		"dnsmasq, `local=/name/` lines in a conf-file (the format OpenWrt's adblock writes: NXDOMAIN), `strict-order` over the two fakes, " +
		fmt.Sprintf("`cache-size=0` or `%d`, `dns-forward-max=%d`, checked with `dnsmasq --test`; ", peerHitsCache, peerForwardMax) +
		"Unbound, an included file of `local-zone: \"name.\" always_null` lines, `module-config: \"iterator\"`, `forward-zone` `.` to the two fakes, " +
		"one thread per core with `so-reuseport`, caches at their defaults or `msg-cache-size: 0`, `rrset-cache-size: 0`, `cache-max-ttl: 0`, checked with `unbound-checkconf`; " +
		"CoreDNS, `hosts FILE { no_reverse; reload 0; fallthrough }` on the same `0.0.0.0 name` file as nxdnsd, `cache 60` or none, `forward . FAKE1 FAKE2 { policy sequential }`. " +
		"dnsdist has no list format and is not in this run.\n")
	for _, row := range pr.rows {
		if row.history && row.fwd != nil {
			if row.historyRows <= 0 {
				notes = append(notes, fmt.Sprintf("%s: this build served no `nxdns_history_rows_total` above 0, so its history wrote nothing: "+
					"the row measures nxdnsd without a history on its query path", row.name))
			} else {
				notes = append(notes, fmt.Sprintf("%s: %s history rows written during (b) and (a)", row.name, thousands(row.historyRows)))
			}
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			fmt.Fprintf(b, "- %s\n", n)
		}
	}
}

// seconds3 formats a load time: "0.412 s", "12.3 s".
func seconds3(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.3f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// verdictPeers is issue 33's check: nxdnsd (history off) with the least
// RSS with the list, the shortest load, and in each of (a), (b) and (c)
// the highest QPS at the lowest CPU per query among the servers measured;
// with its history on, (b) and (c) within historyOffBound of it off.
func (r *report) verdictPeers(check func(bool, string, ...any), notChecked func(string, ...any), pr *peersRuns) {
	var nx, hist *peerRow
	var others []*peerRow
	for _, row := range pr.rows {
		switch {
		case row.history:
			hist = row
		case nx == nil:
			nx = row
		case row.fwd != nil || row.rssBefore > 0:
			others = append(others, row)
		}
	}
	if nx == nil || nx.fwd == nil || nx.hits == nil || nx.blocked == nil {
		notChecked("issue 33: nxdnsd not measured in full in the blocking run")
		return
	}
	if len(others) == 0 {
		notChecked("issue 33: no peer measured in the blocking run")
	}
	type metric struct {
		what        string
		get         func(*peerRow) (float64, bool)
		format      func(float64) string
		lowerBetter bool
	}
	qps := func(f func(*peerRow) *fwdRun) func(*peerRow) (float64, bool) {
		return func(row *peerRow) (float64, bool) {
			if x := f(row); x != nil {
				return x.perf.QPS, true
			}
			return 0, false
		}
	}
	cpu := func(f func(*peerRow) *fwdRun) func(*peerRow) (float64, bool) {
		return func(row *peerRow) (float64, bool) {
			if x := f(row); x != nil {
				return x.cpuPerQuery()
			}
			return 0, false
		}
	}
	blocked := func(row *peerRow) *fwdRun { return row.blocked }
	hits := func(row *peerRow) *fwdRun { return row.hits }
	fwd := func(row *peerRow) *fwdRun { return row.fwd }
	us := func(v float64) string { return fmt.Sprintf("%.1f µs", v) }
	metrics := []metric{
		{"RSS at the first blocked answer", func(row *peerRow) (float64, bool) { return float64(row.rssList), row.rssList > 0 },
			func(v float64) string { return mib(int64(v)) }, true},
		{"start to the first blocked answer", func(row *peerRow) (float64, bool) { return row.load.Seconds(), row.load > 0 },
			func(v float64) string { return seconds3(time.Duration(v * float64(time.Second))) }, true},
		{"(a) blocked QPS", qps(blocked), thousands, false},
		{"(a) blocked CPU per query", cpu(blocked), us, true},
		{"(b) hits QPS", qps(hits), thousands, false},
		{"(b) hits CPU per query", cpu(hits), us, true},
		{"(c) forwarding QPS", qps(fwd), thousands, false},
		{"(c) forwarding CPU per query", cpu(fwd), us, true},
	}
	for _, m := range metrics {
		v, ok := m.get(nx)
		if !ok {
			notChecked("issue 33, %s: not measured for nxdnsd", m.what)
			continue
		}
		var best *peerRow
		var bestV float64
		for _, o := range others {
			ov, ok := m.get(o)
			if ok && (best == nil || (m.lowerBetter && ov < bestV) || (!m.lowerBetter && ov > bestV)) {
				best, bestV = o, ov
			}
		}
		if best == nil {
			continue
		}
		ok = v < bestV
		if !m.lowerBetter {
			ok = v > bestV
		}
		check(ok, "issue 33, %s: nxdnsd %s, the best peer %s %s (nxdnsd / it: %.2f)", m.what, m.format(v), best.name, m.format(bestV), v/bestV)
	}
	if hist == nil {
		notChecked("issue 33, history on: -peers-history=false")
		return
	}
	if hist.historyRows <= 0 {
		notChecked("issue 33, history on within %.0f %% of off: this build wrote no history rows (`nxdns_history_rows_total`)", 100*historyOffBound)
		return
	}
	for _, x := range []struct {
		what    string
		off, on *fwdRun
	}{{"(b) hits", nx.hits, hist.hits}, {"(c) forwarding", nx.fwd, hist.fwd}} {
		if x.on == nil {
			notChecked("issue 33, history on, %s: not measured", x.what)
			continue
		}
		ratio := x.on.perf.QPS / x.off.perf.QPS
		check(ratio >= 1-historyOffBound, "issue 33, history on, %s: QPS %.3f of history off >= %.2f", x.what, ratio, 1-historyOffBound)
		offCPU, ok1 := x.off.cpuPerQuery()
		onCPU, ok2 := x.on.cpuPerQuery()
		if ok1 && ok2 {
			check(onCPU <= offCPU*(1+historyOffBound), "issue 33, history on, %s: CPU per query %.1f µs <= %.2f × history off's %.1f µs",
				x.what, onCPU, 1+historyOffBound, offCPU)
		}
	}
}
