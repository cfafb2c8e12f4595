package daemon

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/admin"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// switchable answers or refuses as the test says; REFUSED is a peer fault.
func switchable(refuse *atomic.Bool) wiretest.Handler {
	return func(w *wiretest.Writer, q *dns.Msg) {
		if refuse.Load() {
			wiretest.Rcode(dns.RcodeRefused)(w, q)
			return
		}
		wiretest.Answer()(w, q)
	}
}

// /api/health follows the upstreams into and out of backoff: ok, degraded,
// down with 503, degraded, ok, every response as openapi.yaml says. The
// backoff is a minute long, so every way out of it is a probe the test
// caused, never the clock.
func TestHealthTransitions(t *testing.T) {
	var refuseA, refuseB atomic.Bool
	a := wiretest.NewServer(t, switchable(&refuseA))
	b := wiretest.NewServer(t, switchable(&refuseB))
	s := startObserved(t, upstreamTOML(a.Addr, b.Addr)+`
[upstream]
failure_threshold = 2
backoff_ms = 60000
backoff_max_ms = 60000
`, false, options{})

	query := func(want int) {
		t.Helper()
		if r := ask(t, "udp", s.udp, wiretest.Query("example.com.", dns.TypeA)); r.Rcode != want {
			t.Fatalf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[want])
		}
	}
	expect := func(step, status string, code int, states ...string) admin.Health {
		t.Helper()
		gotCode, h := s.health(t)
		if h.Status != status || gotCode != code || len(h.Upstreams) != len(states) {
			t.Fatalf("%s: %s (%d), want %s (%d)", step, h.Status, gotCode, status, code)
		}
		for i, st := range states {
			if h.Upstreams[i].State != st {
				t.Errorf("%s: %s is %s, want %s", step, h.Upstreams[i].Name, h.Upstreams[i].State, st)
			}
		}
		return h
	}

	h := expect("start", admin.StatusOK, http.StatusOK, admin.StateHealthy, admin.StateHealthy)
	if u := h.Upstreams[0]; u.Name != "up0" || u.Address != "udp://"+a.Addr || u.Slots != 32 || u.LastError != nil {
		t.Errorf("start: %+v", u)
	}

	// up0 refuses twice: each query fails over to up1; up0 enters backoff.
	refuseA.Store(true)
	query(dns.RcodeSuccess)
	query(dns.RcodeSuccess)
	h = expect("up0 refused twice", admin.StatusDegraded, http.StatusOK, admin.StateBackoff, admin.StateHealthy)
	if u := h.Upstreams[0]; u.LastError == nil || u.LastErrorAt == nil || u.BackoffUntil == nil || u.ConsecutiveFailures != 2 || u.Failures != 2 {
		t.Errorf("up0 in backoff: %+v, want its last error, when, and the end of its backoff", u)
	}
	if u := h.Upstreams[1]; u.Successes != 2 {
		t.Errorf("up1 answered %d, want 2", u.Successes)
	}

	// up1 refuses twice too (up0 is probed in pass two and refuses again).
	refuseB.Store(true)
	query(dns.RcodeServerFailure)
	query(dns.RcodeServerFailure)
	expect("both refused", admin.StatusDown, http.StatusServiceUnavailable, admin.StateBackoff, admin.StateBackoff)

	// Both answer again: pass two probes up0 first, and it recovers.
	refuseA.Store(false)
	refuseB.Store(false)
	query(dns.RcodeSuccess)
	expect("up0 probed", admin.StatusDegraded, http.StatusOK, admin.StateHealthy, admin.StateBackoff)

	// up0 refuses once (below the threshold), so the query reaches pass
	// two, whose probe of up1 succeeds.
	refuseA.Store(true)
	query(dns.RcodeSuccess)
	h = expect("up1 probed", admin.StatusOK, http.StatusOK, admin.StateHealthy, admin.StateHealthy)
	if u := h.Upstreams[1]; u.BackoffUntil != nil || u.ConsecutiveFailures != 0 || u.LastError == nil {
		t.Errorf("up1 recovered: %+v, want no backoff, no streak, its last error kept", u)
	}
}
