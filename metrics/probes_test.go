package metrics

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
)

// The probe counts and the smoothed RTT are read from the pool's Status
// at scrape time: a series per upstream and outcome (zero from start),
// and one per upstream, each family with a HELP text of its own.
func TestProbesAndSRTT(t *testing.T) {
	t.Parallel()
	m := New(Config{Upstreams: []string{"a", weird}})
	var probes [len(actors.Outcomes)]uint64
	probes[actors.OutcomeAnswer], probes[actors.OutcomeExpired], probes[actors.OutcomeLocalError] = 3, 5, 1
	m.AttachPool(&fakePool{status: []actors.Status{
		{Slots: 1, Probes: probes, RTT: actors.RTT{SRTT: 11250 * time.Microsecond, RTTVar: time.Millisecond, Samples: 4}},
		{Slots: 1},
	}})
	var b bytes.Buffer
	m.WritePrometheus(&b)
	for _, help := range []string{
		"# HELP nxdns_upstream_probes_total Health probes of the upstream",
		"# HELP nxdns_upstream_srtt_seconds Smoothed round-trip time of the upstream",
	} {
		if !strings.Contains(b.String(), help) {
			t.Errorf("no %q in the exposition", help)
		}
	}
	fs, err := metricstest.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	if err := metricstest.CheckSpec(fs, []string{"a", weird}, nil); err != nil {
		t.Fatal(err)
	}
	for _, o := range actors.Outcomes {
		if v := value(t, fs, "nxdns_upstream_probes_total", "upstream", "a", "outcome", o.String()); v != float64(probes[o]) {
			t.Errorf("probes of a, %s: %v, want %d", o, v, probes[o])
		}
		if v := value(t, fs, "nxdns_upstream_probes_total", "upstream", weird, "outcome", o.String()); v != 0 {
			t.Errorf("probes of the second upstream, %s: %v, want 0", o, v)
		}
	}
	if v := value(t, fs, "nxdns_upstream_srtt_seconds", "upstream", "a"); v != 0.01125 {
		t.Errorf("srtt of a %v, want 0.01125", v)
	}
	if v := value(t, fs, "nxdns_upstream_srtt_seconds", "upstream", weird); v != 0 {
		t.Errorf("srtt before any answer %v, want 0", v)
	}
}
