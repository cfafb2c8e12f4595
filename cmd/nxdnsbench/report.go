package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/fake"
	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/load"
)

// The acceptance thresholds, checked at the end of every report.
const (
	// targetRatio is the best same-run ratio a peer reached (dnsdist,
	// 0.42–0.48): nxdnsd is to lead the table.
	targetRatio = 0.48

	// maxAllocsPerQuery bounds the steady-state forwarding path's heap
	// allocations per query (issue 6). BenchmarkServeThroughPool and
	// TestForwardingPathAllocations measure the path alone; here the whole
	// process is measured, which adds what is no query's: sync.Pool refills
	// after each GC, workers started after a reap, the runtime's own. That is
	// allowed processSlack per query on top.
	maxAllocsPerQuery = 2
	processSlack      = 0.05

	// maxPeakRSS bounds nxdnsd's peak RSS under the throughput load.
	maxPeakRSS = 40 << 20

	// maxSaturatedP99 bounds the saturated burst's p99: one 100 ms answer
	// of the primary, and little else.
	maxSaturatedP99 = 110 * time.Millisecond
)

// report is one `nxdnsbench run`, rendered as markdown.
type report struct {
	machine    machine
	cfg        runConfig
	throughput *throughput // nil when skipped
	bursts     []*burst
	wall       time.Duration
}

func (r *report) markdown() string {
	var b strings.Builder
	m := r.machine
	fmt.Fprintf(&b, "## nxdnsbench run, %s\n\n", m.Started.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "- machine: %d × %s; %s; commit %s; %s\n", m.CPUs, m.CPUModel, m.GoVersion, m.Commit, m.Nxdnsd)
	fmt.Fprintf(&b, "- load average (1, 5, 15 min) before: %s, after: %s; whole run %v\n",
		m.LoadStart, m.LoadEnd, r.wall.Round(time.Second))
	fmt.Fprintf(&b, "- nxdnsd: shipped defaults (attempt 2500 ms, total 5000 ms), two plain-UDP upstreams, both in-process fakes of nxdnsbench on loopback\n")
	if t := r.throughput; t != nil && t.dot != nil {
		fmt.Fprintf(&b, "- DoT row: a second nxdnsd, the same settings, its two upstreams the same fakes over DNS over TLS "+
			"(`tls://%s:PORT`, `ip = \"127.0.0.1\"`, `ca_file` a throwaway ECDSA P-256 CA of the run's); dnsperf still asks nxdnsd over UDP\n",
			fake.TLSName)
	}
	if t := r.throughput; t != nil {
		r.writeThroughput(&b, t)
	}
	if len(r.bursts) > 0 {
		r.writeBursts(&b)
	}
	r.writeVerdict(&b)
	return b.String()
}

func (r *report) writeThroughput(b *strings.Builder, t *throughput) {
	c := r.cfg
	fmt.Fprintf(b, "\n### Throughput: dnsperf %s, %s distinct names, UDP\n\n", c.perf, thousands(float64(c.names)))
	fmt.Fprintf(b, "| target | QPS | ratio | sent | lost | mean | max | CPU %% dnsperf / fakes / nxdnsd / softirq / others | nxdnsd peak RSS |\n")
	fmt.Fprintf(b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n")
	row := func(name string, p *perfResult, fakeCPU, nxCPU time.Duration, mc cpuSplit, rss string) {
		nx := "–"
		if nxCPU > 0 {
			nx = cpuPct(nxCPU, p.Wall)
		}
		others := max(mc.Tasks-p.CPU-fakeCPU-nxCPU, 0)
		fmt.Fprintf(b, "| %s | %s | %.2f | %s | %s | %s | %s | %s / %s / %s / %s / %s | %s |\n",
			name, thousands(p.QPS), p.QPS/t.ceiling.QPS, thousands(float64(p.Sent)), thousands(float64(p.Lost)),
			ms(p.MeanLatency), ms(p.MaxLatency), cpuPct(p.CPU, p.Wall), cpuPct(fakeCPU, p.Wall), nx,
			cpuPct(mc.SoftIRQ, p.Wall), cpuPct(others, p.Wall), rss)
	}
	row("ceiling: dnsperf → fake", t.ceiling, t.ceilFakeCPU, 0, t.ceilMachine, "–")
	row("dnsperf → nxdnsd → fake", t.nx.perf, t.nx.fakeCPU, t.nx.nxCPU, t.nx.machine, mib(t.nx.peakRSS))
	if d := t.dot; d != nil {
		row("dnsperf → nxdnsd → fake (DoT)", d.perf, d.fakeCPU, d.nxCPU, d.machine, mib(d.peakRSS))
	}
	fmt.Fprintf(b, "\nCPU is %% of one core over dnsperf's whole run (%d cores: %d %% in all); the fakes run inside nxdnsbench; "+
		"softirq is the kernel's packet delivery on loopback, charged to no process; others is the rest of the "+
		"machine's busy time (/proc/stat): other processes.\n", r.machine.CPUs, 100*r.machine.CPUs)
	perQuery := func(cpu time.Duration, p *perfResult) string {
		if p.Completed == 0 {
			return "?"
		}
		return fmt.Sprintf("%.1f µs", float64(cpu)/float64(time.Microsecond)/float64(p.Completed))
	}
	fmt.Fprintf(b, "\nCPU per answered query: ceiling run dnsperf %s, fake %s; nxdnsd run dnsperf %s, fakes %s, nxdnsd %s",
		perQuery(t.ceiling.CPU, t.ceiling), perQuery(t.ceilFakeCPU, t.ceiling),
		perQuery(t.nx.perf.CPU, t.nx.perf), perQuery(t.nx.fakeCPU, t.nx.perf), perQuery(t.nx.nxCPU, t.nx.perf))
	if d := t.dot; d != nil {
		fmt.Fprintf(b, "; DoT run dnsperf %s, fakes %s, nxdnsd %s",
			perQuery(d.perf.CPU, d.perf), perQuery(d.fakeCPU, d.perf), perQuery(d.nxCPU, d.perf))
	}
	b.WriteString(".\n")
	if t.nx.allocsPerQuery >= 0 {
		fmt.Fprintf(b, "\nnxdnsd heap allocations per query under dnsperf: %.2f (go_memstats_mallocs_total on its admin /metrics, whole process; the scrape that reads it, %d allocations measured while idle, left out).\n",
			t.nx.allocsPerQuery, t.nx.scrapeAllocs)
	} else {
		fmt.Fprintf(b, "\nnxdnsd heap allocations per query: not measured (its admin endpoint serves no go_memstats_mallocs_total).\n")
	}
	if d := t.dot; d != nil && d.allocsPerQuery >= 0 {
		fmt.Fprintf(b, "With DoT upstreams: %.2f per query, measured alike (%d allocations per scrape left out).\n",
			d.allocsPerQuery, d.scrapeAllocs)
	}

	fs := t.fakeStats
	fmt.Fprintf(b, "\nThe primary fake read %s queries and answered %s (%d dropped) over the ceiling and UDP runs.\n",
		thousands(float64(fs.Queries)), thousands(float64(fs.Answers)), fs.Dropped)
	if d := t.dot; d != nil {
		ds := d.fakeStats
		fmt.Fprintf(b, "In the DoT run it read %s queries on %d TLS connections and answered %s (%d dropped); "+
			"the DoT pass (nxdnsd's start, dnsperf, its stop) took %v.\n",
			thousands(float64(ds.Queries)), ds.TLSConns, thousands(float64(ds.Answers)), ds.Dropped, d.wall.Round(100*time.Millisecond))
	}
	if t.profile != "" {
		fmt.Fprintf(b, "nxdnsd's perf profile under dnsperf: `perf report -i %s`.\n", t.profile)
	}

	if t.latCeiling == nil {
		return
	}
	fmt.Fprintf(b, "\n### Latency: nxdnsbench load, %d in flight for %v per target, UDP\n\n", c.latencyInFlight, c.latency)
	fmt.Fprintf(b, "| target | answered/s | mean | p50 | p99 | max | timeouts |\n")
	fmt.Fprintf(b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	lat := func(name string, res *load.Result) {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %d |\n", name, thousands(res.QPS()),
			ms(res.Mean()), ms(res.Percentile(0.5)), ms(res.Percentile(0.99)), ms(res.Percentile(1)), res.Timeouts)
	}
	lat("fake", t.latCeiling)
	lat("nxdnsd", t.latNxdnsd)
	fmt.Fprintf(b, "\nnxdnsd peak RSS after the latency run as well: %s.\n", mib(t.peakRSSAfter))
}

func (r *report) writeBursts(b *strings.Builder) {
	c := r.cfg
	fmt.Fprintf(b, "\n### Fault bursts: %s queries, %d in flight, %v client timeout, UDP\n\n",
		thousands(float64(c.burstQueries)), c.burstInFlight, c.burstTimeout)
	fmt.Fprintf(b, "| scenario | answered | SERVFAIL | REFUSED | other | timeouts | unsent | p50 | p95 | p99 | max | peak RSS |\n")
	fmt.Fprintf(b, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, x := range r.bursts {
		res := x.res
		other := res.Answered() - res.Rcodes[0] - res.Rcodes[2] - res.Rcodes[5]
		fmt.Fprintf(b, "| %s | %.1f %% | %d | %d | %d | %d | %d | %s | %s | %s | %s | %s |\n",
			x.Name, x.answeredPct(), res.Rcodes[2], res.Rcodes[5], other, res.Timeouts+res.Errors, res.Unsent,
			ms(res.Percentile(0.5)), ms(res.Percentile(0.95)), ms(res.Percentile(0.99)), ms(res.Percentile(1)), mib(x.peakRSS))
	}
	fmt.Fprintf(b, "\nAnswered is NOERROR with the answer; percentiles are over every answer, whatever its rcode. "+
		"The flip scenario answers %d warm-up queries first, then blackholes the primary for the burst.\n", warmUpQueries)
}

func (r *report) writeVerdict(b *strings.Builder) {
	fmt.Fprintf(b, "\n### Acceptance\n\n")
	check := func(ok bool, format string, a ...any) {
		mark := "FAIL"
		if ok {
			mark = "pass"
		}
		fmt.Fprintf(b, "- %s: %s\n", mark, fmt.Sprintf(format, a...))
	}
	if t := r.throughput; t != nil {
		ratio := t.nx.perf.QPS / t.ceiling.QPS
		check(ratio > targetRatio, "ratio to the same-run ceiling %.3f > %.2f", ratio, targetRatio)
		if t.nx.allocsPerQuery >= 0 {
			check(t.nx.allocsPerQuery <= maxAllocsPerQuery+processSlack,
				"heap allocations per forwarded query, whole process, %.2f <= %d (+ %.2f the process's own; the path alone: BenchmarkServeThroughPool)",
				t.nx.allocsPerQuery, maxAllocsPerQuery, processSlack)
		}
		check(t.nx.peakRSS < maxPeakRSS, "peak RSS under the throughput load %s < %s", mib(t.nx.peakRSS), mib(maxPeakRSS))
		if d := t.dot; d != nil {
			allocs := "not measured"
			if d.allocsPerQuery >= 0 {
				allocs = fmt.Sprintf("%.2f", d.allocsPerQuery)
			}
			fmt.Fprintf(b, "- info (no threshold): DoT upstreams: ratio to the same-run ceiling %.3f, heap allocations per query %s, peak RSS %s\n",
				d.perf.QPS/t.ceiling.QPS, allocs, mib(d.peakRSS))
		}
	}
	for _, x := range r.bursts {
		check(x.answeredPct() == 100, "%s: %.1f %% answered", x.Name, x.answeredPct())
		if x.Slug == "saturated" {
			p99 := x.res.Percentile(0.99)
			check(p99 < maxSaturatedP99, "%s: p99 %.1f ms < %s", x.Name, float64(p99)/float64(time.Millisecond), ms(maxSaturatedP99))
		}
	}
}

// ms formats a duration in milliseconds with three significant digits or
// so: 0.312 ms, 4.50 ms, 2503 ms.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 1:
		return fmt.Sprintf("%.3f ms", v)
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 100:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.0f ms", v)
	}
}

// thousands formats v rounded to an integer with comma separators.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func cpuPct(cpu, wall time.Duration) string {
	if wall <= 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f", 100*cpu.Seconds()/wall.Seconds())
}
