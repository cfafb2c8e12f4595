package metrics

import (
	"testing"
	"time"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/metrics/metricstest"
)

// A reload's pool: the kept upstream goes on counting where it was, the
// new one has every series at zero, the removed one's series are gone,
// and the pool-read families follow the new pool's order.
func TestUsePoolFollowsAReloadedPool(t *testing.T) {
	t.Parallel()
	m := New(Config{Upstreams: []string{"kept", "removed"}})
	m.AttachPool(&fakePool{status: []actors.Status{{Successes: 1}, {Successes: 2}}})
	m.ObserveAttempt(0, actors.OutcomeAnswer, time.Millisecond)
	m.ObserveAttempt(1, actors.OutcomeExpired, time.Millisecond)

	ups := m.Upstreams([]string{"added", "kept"})
	m.UsePool(&fakePool{status: []actors.Status{{Successes: 5, Slots: 3}, {Successes: 1}}}, ups)
	ups.ObserveAttempt(1, actors.OutcomeAnswer, time.Millisecond) // "kept", now at index 1
	m.ObserveAttempt(1, actors.OutcomeExpired, time.Millisecond)  // a query of the old pool, finishing late: unseen

	fs := scrape(t, m)
	if err := metricstest.CheckSpec(fs, []string{"added", "kept"}, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"nxdns_upstream_attempts_total", []string{"upstream", "kept", "outcome", "answer"}, 2},
		{"nxdns_upstream_attempts_total", []string{"upstream", "added", "outcome", "answer"}, 0},
		{"nxdns_upstream_attempt_duration_seconds_count", []string{"upstream", "kept"}, 2},
		{"nxdns_upstream_success_total", []string{"upstream", "added"}, 5},
		{"nxdns_upstream_success_total", []string{"upstream", "kept"}, 1},
		{"nxdns_upstream_slots", []string{"upstream", "added"}, 3},
	} {
		if v := value(t, fs, tc.name, tc.labels...); v != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, v, tc.want)
		}
	}
	for _, name := range []string{"nxdns_upstream_attempts_total", "nxdns_upstream_attempt_duration_seconds_count", "nxdns_upstream_success_total"} {
		for _, s := range fs[familyOf(name)].Samples {
			if s.Name == name && s.Labels["upstream"] == "removed" {
				t.Errorf("%s still has a series for the removed upstream", name)
			}
		}
	}
}

// familyOf is the family a histogram sample belongs to.
func familyOf(sample string) string {
	if sample == "nxdns_upstream_attempt_duration_seconds_count" {
		return "nxdns_upstream_attempt_duration_seconds"
	}
	return sample
}

func TestUseZonesAddsTheNewZonesSeries(t *testing.T) {
	t.Parallel()
	m := New(Config{Upstreams: []string{"a"}, Zones: []string{"lan."}})
	m.ForwardZone("lan.", "answer")
	m.UseZones([]string{"lan.", "iot.lan."})
	m.ForwardZone("iot.lan.", "timeout")
	fs := scrape(t, m)
	if err := metricstest.CheckSpec(fs, []string{"a"}, []string{"lan.", "iot.lan."}); err != nil {
		t.Fatal(err)
	}
	if v := value(t, fs, "nxdns_forward_zone_queries_total", "zone", "lan.", "outcome", "answer"); v != 1 {
		t.Errorf("lan. answers = %v after the reload, want the 1 from before", v)
	}
	if v := value(t, fs, "nxdns_forward_zone_queries_total", "zone", "iot.lan.", "outcome", "timeout"); v != 1 {
		t.Errorf("iot.lan. timeouts = %v, want 1", v)
	}
}

func TestConfigReloadsCountedByResult(t *testing.T) {
	t.Parallel()
	m := New(Config{Upstreams: []string{"a"}})
	fs := scrape(t, m)
	for _, r := range []string{"success", "failure"} {
		if v := value(t, fs, "nxdns_config_reloads_total", "result", r); v != 0 {
			t.Errorf("reloads %s = %v at start, want 0", r, v)
		}
	}
	m.ConfigReload(true)
	m.ConfigReload(false)
	m.ConfigReload(false)
	fs = scrape(t, m)
	if s, f := value(t, fs, "nxdns_config_reloads_total", "result", "success"), value(t, fs, "nxdns_config_reloads_total", "result", "failure"); s != 1 || f != 2 {
		t.Errorf("reloads success=%v failure=%v, want 1 and 2", s, f)
	}
}

// The pool's own counters never go back at a reload: the scrape adds what
// the replaced pools counted, before the swap and, once retired, after.
// Mutation check: dropping UsePool's base makes the first scrape after the
// swap read 0; dropping RetirePool's delta leaves it at 5.
func TestPoolCountersCarryOnAcrossPools(t *testing.T) {
	t.Parallel()
	m := New(Config{Upstreams: []string{"a"}})
	old := &fakePool{exhausted: 4, queued: 2, queuedSeconds: 0.5}
	m.AttachPool(old)
	next := &fakePool{queued: 1, queuedSeconds: 0.25}
	m.UsePool(next, m.Upstreams([]string{"a"}))
	check := func(when string, exhausted, queued, seconds float64) {
		t.Helper()
		fs := scrape(t, m)
		if v := value(t, fs, "nxdns_upstream_budget_exhausted_total"); v != exhausted {
			t.Errorf("%s: budget exhausted %v, want %v", when, v, exhausted)
		}
		if v := value(t, fs, "nxdns_upstream_queued_total"); v != queued {
			t.Errorf("%s: queued %v, want %v", when, v, queued)
		}
		if v := value(t, fs, "nxdns_upstream_queued_seconds_total"); v != seconds {
			t.Errorf("%s: queued seconds %v, want %v", when, v, seconds)
		}
	}
	check("after the swap", 4, 3, 0.75)
	old.exhausted = 6 // two queries of the old pool ran out after the swap
	next.exhausted = 1
	check("before the old pool retires", 5, 3, 0.75)
	m.RetirePool(old)
	check("after it retired", 7, 3, 0.75)
	m.RetirePool(old)
	check("retired twice", 7, 3, 0.75)
}
