package main

import (
	"strings"
	"testing"
)

// The drops are the drop and insert_failed columns, found by the header's
// names and summed over the CPUs' lines of hexadecimal counters.
func TestParseConntrackDrops(t *testing.T) {
	stat := `entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart
0003f2d0  00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000000 00000003 0000000a 00033859 00000000  00000000 00000000 00000000 00000000
0003f2d0  00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000010 00032ee4 00000000  00000000 00000000 00000000 00000000
`
	if got := parseConntrackDrops([]byte(stat)); got != 3+10+16 {
		t.Errorf("drops %d, want 29", got)
	}
	if got := parseConntrackDrops([]byte("garbage")); got != 0 {
		t.Errorf("drops %d from garbage, want 0", got)
	}
}

// The report says when connection tracking dropped packets during a run,
// and that the run's figures are then not comparable.
func TestConntrackLine(t *testing.T) {
	if got := conntrackLine(conntrack{}, conntrack{}); !strings.Contains(got, "not loaded") {
		t.Errorf("without conntrack: %q", got)
	}
	quiet := conntrackLine(conntrack{On: true, Count: 10, Max: 100, Drops: 5}, conntrack{On: true, Count: 50, Max: 100, Drops: 5})
	if !strings.Contains(quiet, "10 of 100 entries before, 50 after; 0 packets dropped") || strings.Contains(quiet, "not comparable") {
		t.Errorf("no drops: %q", quiet)
	}
	full := conntrackLine(conntrack{On: true, Count: 90, Max: 100, Drops: 5}, conntrack{On: true, Count: 100, Max: 100, Drops: 12})
	if !strings.Contains(full, "7 packets dropped") || !strings.Contains(full, "not comparable") {
		t.Errorf("drops: %q", full)
	}
}
