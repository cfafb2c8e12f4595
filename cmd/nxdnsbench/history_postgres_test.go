package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// A real run of the history rows with PostgreSQL: dnsperf, nxdnsd and a
// throwaway server, every figure of the table measured.
func TestHistoryPostgresSmoke(t *testing.T) {
	if os.Getenv("NXDNSBENCH_HISTORY_PG") != "1" {
		t.Skip("a real run of dnsperf, nxdnsd and PostgreSQL, 10,000 names: set NXDNSBENCH_HISTORY_PG=1 to run it")
	}
	var out, errs bytes.Buffer
	err := runCmd(context.Background(), []string{"-l", "2s", "-names", "10000", "-latency", "0", "-bursts=false", "-dnsdist=false",
		"-hits=false", "-encrypted=false", "-peers-blocking", "0", "-history", "-history-store", "postgres", "-history-qps", "2000"}, &out, &errs)
	if err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	text := out.String()
	_, table, ok := strings.Cut(text, "### Query history: on, in PostgreSQL (issue 32)")
	if !ok {
		t.Fatalf("no PostgreSQL history table:\n%s", text)
	}
	table, _, _ = strings.Cut(table, "\n\nThe rows")
	for _, row := range []string{"| forwarding: 10,000 names |", "| forwarding at dnsperf -Q 2000 |"} {
		i := strings.Index(table, row)
		if i < 0 {
			t.Errorf("no row %q:\n%s", row, table)
			continue
		}
		line, _, _ := strings.Cut(table[i:], "\n")
		if strings.Contains(line, "?") || strings.Count(line, " µs") < 2 {
			t.Errorf("row not measured in full: %s", line)
		}
	}
	if !strings.Contains(text, "- pass: issue 32, forwarding at dnsperf -Q 2000 for 2s with history.postgres: ") {
		t.Errorf("rows lost at 2,000 queries a second:\n%s", text)
	}
}
