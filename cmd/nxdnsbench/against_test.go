package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The rows against a base: the table gives each side's median run and the
// pairs' ratios, and the verdict fails a row whose QPS, CPU per query or
// allocations per query are worse than the base's past the noise, and
// passes one within it.
func TestAgainstReport(t *testing.T) {
	t.Parallel()
	run := func(qps float64, cpu time.Duration, allocs float64) *fwdRun {
		return &fwdRun{perf: &perfResult{Sent: int(qps * 5), Completed: int(qps * 5), QPS: qps, RunTime: 5 * time.Second, Wall: 5 * time.Second},
			cpu: cpu, allocsPerQuery: allocs, scrapeAllocs: -1}
	}
	r := report{
		machine: machine{CPUs: 2, Started: time.Now()},
		cfg:     runConfig{perf: perfParams{Duration: 5 * time.Second, Clients: 20, Outstanding: 100, Threads: 2}, names: 1000, hitNames: 100},
	}
	ar := &againstRuns{rev: "v1", commit: "abc1234",
		// Forwarding: as fast, as cheap, as many allocations.
		fwd: &pairRuns{
			a: []*fwdRun{run(60_000, 5*time.Second, 1.01), run(61_000, 5*time.Second, 1.01), run(59_000, 5*time.Second, 1.01)},
			b: []*fwdRun{run(60_500, 5*time.Second, 1.01), run(59_500, 5*time.Second, 1.02), run(60_000, 5*time.Second, 1.01)},
		},
		// Hits: 10 % slower, 20 % dearer, one more allocation a query.
		hits: &pairRuns{
			a: []*fwdRun{run(200_000, 5*time.Second, 0), run(200_000, 5*time.Second, 0), run(200_000, 5*time.Second, 0)},
			b: []*fwdRun{run(180_000, 5400*time.Millisecond, 1), run(180_000, 5400*time.Millisecond, 1), run(180_000, 5400*time.Millisecond, 1)},
		},
	}
	var b strings.Builder
	r.writeAgainst(&b, ar)
	var v strings.Builder
	check := func(ok bool, format string, a ...any) {
		mark := "FAIL"
		if ok {
			mark = "pass"
		}
		v.WriteString(mark + ": " + fmt.Sprintf(format, a...) + "\n")
	}
	r.verdictAgainst(check, func(string, ...any) {}, ar)
	md := b.String() + v.String()
	for _, want := range []string{
		"### Against v1 (abc1234), side by side",
		"| forwarding: 1,000 names, no cache | 60,000 | 16.7 µs | 1.01 | 60,000 | 16.7 µs | 1.01 | 1.008 (1.008, 0.975, 1.017) | 1.000 |",
		"| hits: 100 names over and over | 200,000 | 5.0 µs | 0.00 | 180,000 | 6.0 µs | 1.00 | 0.900 (0.900, 0.900, 0.900) | 1.200 |",
		"pass: against abc1234, forwarding: QPS 1.008 of the base's >= 0.95",
		"pass: against abc1234, forwarding: CPU per query 16.7 µs <= the base's 16.7 µs + 5 %",
		"pass: against abc1234, forwarding: heap allocations per query 1.01 <= the base's 1.01 + 0.02",
		"FAIL: against abc1234, hits: QPS 0.900 of the base's >= 0.95",
		"FAIL: against abc1234, hits: CPU per query 6.0 µs <= the base's 5.0 µs + 5 %",
		"FAIL: against abc1234, hits: heap allocations per query 1.00 <= the base's 0.00 + 0.02",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
