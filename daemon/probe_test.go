package daemon

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/admin"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// probeEvent is one health probe as the daemon's actors applied it.
type probeEvent struct {
	upstream string
	outcome  actors.Outcome
	st       actors.Status // the upstream's state once the probe was applied
}

// probeEvents returns daemon options whose probe hook reports every
// applied probe on the channel, and the channel. The hook runs on an
// actor's goroutine; the channel is deep enough that no test here fills
// it, and a full one would only stall that actor until the test reads.
func probeEvents() (options, <-chan probeEvent) {
	ch := make(chan probeEvent, 256)
	return options{onProbe: func(name string, o actors.Outcome, st actors.Status) {
		ch <- probeEvent{name, o, st}
	}}, ch
}

// next returns the next probe event of upstream (another upstream's are
// dropped), failing the test after a minute: a bound on a hung daemon,
// never a timing assertion.
func next(tb testing.TB, events <-chan probeEvent, upstream string) probeEvent {
	tb.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		select {
		case e := <-events:
			if e.upstream == upstream {
				return e
			}
		case <-deadline.C:
			tb.Fatalf("no probe of %s applied within a minute", upstream)
		}
	}
}

// killable returns a fake upstream's handlers for client queries and for
// probes: each answers (with A(qname, id) for clients) until dead is set,
// and then swallows the query, a blackhole.
func killable(dead *atomic.Bool, id int) (clients, probes wiretest.Handler) {
	serve := func(h wiretest.Handler) wiretest.Handler {
		return func(w *wiretest.Writer, q *dns.Msg) {
			if dead.Load() {
				wiretest.Stall(w, q)
				return
			}
			h(w, q)
		}
	}
	return serve(func(w *wiretest.Writer, q *dns.Msg) {
		wiretest.Answer(wiretest.A(q.Question[0].Name, id))(w, q)
	}), serve(wiretest.Answer())
}

// answeredBy returns the index of the fake that answered r (the last
// byte of its A record, as killable answers), or -1.
func answeredBy(r *dns.Msg) int {
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return -1
	}
	a, ok := r.Answer[0].(*dns.A)
	if !ok {
		return -1
	}
	return int(a.A.To4()[3]) - int(wiretest.TestAddr.As4()[3])
}

// A primary dead from the start sees nothing but probes: its start-up
// probe puts it into backoff before any client asks, every client query
// goes to the standby at once, and its actor probes it at the end of each
// backoff. When it comes back, a probe finds it, and clients go back to it.
// Real sockets, short timings; every step waits on an event (a probe
// applied), never on the clock.
func TestDeadPrimarySeesOnlyProbes(t *testing.T) {
	var primaryDead, standbyDead atomic.Bool
	primaryDead.Store(true)
	pc, pp := killable(&primaryDead, 0)
	primary := wiretest.NewServer(t, pc)
	primary.HandleProbes(pp)
	sc, sp := killable(&standbyDead, 1)
	standby := wiretest.NewServer(t, sc)
	standby.HandleProbes(sp)
	opts, events := probeEvents()
	s := startObserved(t, upstreamTOML(primary.Addr, standby.Addr)+`
[upstream]
attempt_timeout_ms = 2000
total_timeout_ms = 4000
failure_threshold = 3
backoff_ms = 100
backoff_max_ms = 200
probe_timeout_ms = 100
`, false, opts)

	// The start-up probe expires: backoff at once, not after three
	// failures of clients.
	if e := next(t, events, "up0"); e.outcome != actors.OutcomeExpired || !e.st.InBackoff {
		t.Fatalf("the dead primary's start-up probe: %v, in backoff %v; want expired, in backoff", e.outcome, e.st.InBackoff)
	}
	for round := range 3 {
		for range 20 {
			r := ask(t, "udp", s.udp, wiretest.Query("example.com.", dns.TypeA))
			if by := answeredBy(r); by != 1 {
				t.Fatalf("round %d: answered by %d (rcode %s), want the standby", round, by, dns.RcodeToString[r.Rcode])
			}
		}
		// The actor keeps probing the primary, and keeps it in backoff.
		if e := next(t, events, "up0"); e.outcome != actors.OutcomeExpired || !e.st.InBackoff {
			t.Fatalf("round %d: probe %v, in backoff %v", round, e.outcome, e.st.InBackoff)
		}
	}
	if n := primary.UDPQueries() + primary.TCPQueries(); n != 0 {
		t.Fatalf("the dead primary saw %d client queries, want none", n)
	}
	if n := primary.Probes(); n < 4 {
		t.Errorf("the dead primary saw %d probes, want at least 4", n)
	}

	// It comes back; the next probe that reaches it heals it.
	primaryDead.Store(false)
	for {
		e := next(t, events, "up0")
		if e.outcome == actors.OutcomeAnswer {
			if e.st.InBackoff {
				t.Fatalf("a probe answered and the primary is still in backoff: %+v", e.st)
			}
			break
		}
		// A probe sent while it was dead expires after the revival.
		if e.outcome != actors.OutcomeExpired {
			t.Fatalf("probe %v, want expired or answer", e.outcome)
		}
	}
	for range 5 {
		if by := answeredBy(ask(t, "udp", s.udp, wiretest.Query("example.com.", dns.TypeA))); by != 0 {
			t.Fatalf("after the primary recovered: answered by %d, want the primary", by)
		}
	}
	code, h := s.health(t)
	u := h.Upstreams[0]
	if code != http.StatusOK || h.Status != admin.StatusOK || u.Successes != 5 || u.Failures != 0 || u.ConsecutiveFailures != 0 {
		t.Errorf("health: %s (%d), primary %d successes %d failures (streak %d); want ok, 5 and 0: probes are not counted",
			h.Status, code, u.Successes, u.Failures, u.ConsecutiveFailures)
	}
	if u.LastProbeOutcome == nil || *u.LastProbeOutcome != "answer" || u.LastProbeAt == nil || u.SRTTMs == nil {
		t.Errorf("health: last probe %v at %v, srtt %v; want its answer, and an RTT", u.LastProbeOutcome, u.LastProbeAt, u.SRTTMs)
	}
	if u.LastError == nil || !strings.Contains(*u.LastError, "deadline") {
		t.Errorf("health: last error %v, want the probes' expiry", u.LastError)
	}
	fs := s.scrape(t)
	if v := metricValue(t, fs, "nxdns_upstream_probes_total", "upstream", "up0", "outcome", "answer"); v != 1 {
		t.Errorf("up0's answered probes %v, want 1", v)
	}
	if v := metricValue(t, fs, "nxdns_upstream_attempts_total", "upstream", "up0", "outcome", "expired"); v != 0 {
		t.Errorf("up0's expired attempts %v, want 0: no client ever waited for it", v)
	}
	if v := metricValue(t, fs, "nxdns_upstream_srtt_seconds", "upstream", "up0"); v <= 0 {
		t.Errorf("up0's smoothed RTT %v, want a measurement", v)
	}
}

// Both upstreams blackholed, then restored. While both are down every
// failed probe puts its upstream back for backoff_ms, not doubled; after
// the restore each upstream needs at most the one probe that was already
// out, then the next one (backoff_ms later) finds it: service is back
// within probe_timeout_ms + backoff_ms of the network. The test counts
// probes and reads the backoff each left; it never measures the clock, so
// a slow machine cannot fail it (a probe gets a whole second).
func TestAllDownRecovery(t *testing.T) {
	var dead atomic.Bool
	dead.Store(true)
	var fakes [2]*wiretest.Server
	for i := range fakes {
		c, p := killable(&dead, i)
		fakes[i] = wiretest.NewServer(t, c)
		fakes[i].HandleProbes(p)
	}
	opts, events := probeEvents()
	const backoff = 100 * time.Millisecond
	s := startObserved(t, upstreamTOML(fakes[0].Addr, fakes[1].Addr)+`
[upstream]
attempt_timeout_ms = 1000
total_timeout_ms = 2000
failure_threshold = 1
backoff_ms = 100
backoff_max_ms = 60000
probe_timeout_ms = 1000
`, false, opts)

	failed := map[string]int{}
	for failed["up0"] < 3 || failed["up1"] < 3 {
		e := <-events
		if e.outcome != actors.OutcomeExpired || !e.st.InBackoff {
			t.Fatalf("%s during the blackout: %v, in backoff %v", e.upstream, e.outcome, e.st.InBackoff)
		}
		if got := e.st.BackoffUntil.Sub(e.st.LastProbeAt); got != backoff {
			t.Fatalf("%s's probe %d left a backoff of %v, want backoff_ms: every upstream is down", e.upstream, failed[e.upstream]+1, got)
		}
		failed[e.upstream]++
	}
	if code, h := s.health(t); code != http.StatusServiceUnavailable || h.Status != admin.StatusDown {
		t.Fatalf("health during the blackout: %s (%d)", h.Status, code)
	}

	dead.Store(false)
	after := map[string]int{} // failed probes applied after the restore
	healed := map[string]bool{}
	for len(healed) < 2 {
		e := <-events
		switch {
		case e.outcome == actors.OutcomeAnswer && !e.st.InBackoff:
			healed[e.upstream] = true
		case e.outcome == actors.OutcomeExpired && !healed[e.upstream]:
			after[e.upstream]++
			if got := e.st.BackoffUntil.Sub(e.st.LastProbeAt); got > backoff && len(healed) == 0 {
				t.Errorf("%s: backoff of %v after the restore, want backoff_ms while both were down", e.upstream, got)
			}
		default:
			t.Fatalf("%s after the restore: %v, in backoff %v", e.upstream, e.outcome, e.st.InBackoff)
		}
	}
	for up, n := range after {
		if n > 1 {
			t.Errorf("%s: %d probes failed after the restore, want at most the one already out", up, n)
		}
	}
	r := ask(t, "udp", s.udp, wiretest.Query("example.com.", dns.TypeA))
	if by := answeredBy(r); by != 0 {
		t.Fatalf("after the recovery: answered by %d (rcode %s), want the primary", by, dns.RcodeToString[r.Rcode])
	}
	if code, h := s.health(t); code != http.StatusOK || h.Status != admin.StatusOK {
		t.Errorf("health after the recovery: %s (%d)", h.Status, code)
	}
	for i, f := range fakes {
		if n := f.UDPQueries() + f.TCPQueries(); n != int64(1-i) {
			t.Errorf("fake %d saw %d client queries, want %d: nothing but probes during the blackout", i, n, 1-i)
		}
	}
}
