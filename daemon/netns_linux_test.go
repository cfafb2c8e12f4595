package daemon

import (
	"errors"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/admin"
	"github.com/nxdnsd/nxdnsd/internal/netnstest"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// wanAddr is the upstream's address in the namespace (TEST-NET-2): no
// route reaches it until the test puts it on lo, which gives the host a
// way to it, and takes it off again.
const wanAddr = "198.51.100.53"

// ipAddr runs "ip addr add|del wanAddr/32 dev lo" in the namespace.
func ipAddr(t *testing.T, verb string) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "ip", "addr", verb, wanAddr+"/32", "dev", "lo").CombinedOutput()
	if err != nil {
		t.Fatalf("ip addr %s %s: %v: %s", verb, wanAddr, err, out)
	}
}

// freeUpstream is a fake upstream on wanAddr, bound before the address
// exists (IP_FREEBIND): it answers every query with A(qname, 7) and
// probes with an empty answer, once a route to it exists.
func freeUpstream(t *testing.T) string {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1) })
		return errors.Join(err, serr)
	}}
	pc, err := lc.ListenPacket(t.Context(), "udp4", wanAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, NotifyStartedFunc: func() { close(started) },
		Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
			r := new(dns.Msg)
			r.SetReply(q)
			if q.Question[0].Qtype == dns.TypeA {
				r.Answer = append(r.Answer, wiretest.A(q.Question[0].Name, 7))
			}
			_ = w.WriteMsg(r)
		})}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.ActivateAndServe() })
	<-started
	t.Cleanup(func() {
		_ = srv.Shutdown()
		wg.Wait()
	})
	return pc.LocalAddr().String()
}

// In a network namespace with loopback alone (the WAN down), the status
// report says the network is down from the first probe on, with the
// host's own error, although the upstream is healthy (a local error
// blames nobody); the probes go on every backoff_ms, and the first that
// follows a route's return says it no longer. A client query's local
// error says it again at once. Real sockets, real routes; each step waits
// on a probe's event or a query's answer, never on the clock.
//
// Mutation checks: without the link probes, no probe follows the start-up
// one and the test waits in vain for the second; without Pool.LocalError
// from the observer, the report stays ok after the route goes again.
func TestNetworkDownInANamespace(t *testing.T) {
	if !netnstest.InOwn(t) {
		return
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2's ip is not installed: this test adds and removes a route with it")
	}
	upstream := freeUpstream(t)
	opts, events := probeEvents()
	s := startObserved(t, `[upstream]
attempt_timeout_ms = 500
total_timeout_ms = 1000
failure_threshold = 3
backoff_ms = 100
backoff_max_ms = 1000
probe_timeout_ms = 500
[[upstreams]]
name = "wan"
address = "udp://`+upstream+`"
`, false, opts)

	// The start-up probe finds no route: the network is down.
	if e := next(t, events, "wan"); e.outcome != actors.OutcomeLocalError || e.st.InBackoff {
		t.Fatalf("the start-up probe without a route: %v, in backoff %v; want local_error, healthy", e.outcome, e.st.InBackoff)
	}
	code, h := s.health(t)
	if code != http.StatusServiceUnavailable || h.Status != admin.StatusDown || h.Reason != admin.ReasonNetwork {
		t.Fatalf("/api/health without a route: %s %q (%d), want down, network (503)", h.Status, h.Reason, code)
	}
	if h.LastLocalError == nil || !strings.Contains(*h.LastLocalError, "network is unreachable") || h.LastLocalErrorAt == nil {
		t.Errorf("last local error %v at %v, want the host's ENETUNREACH", h.LastLocalError, h.LastLocalErrorAt)
	}
	if u := h.Upstreams[0]; u.State != admin.StateHealthy || u.LastError != nil {
		t.Errorf("the upstream: %s, last error %v; want healthy, nothing recorded against it", u.State, u.LastError)
	}
	if code, body := s.get(t, "/readyz"); code != http.StatusServiceUnavailable || !strings.HasPrefix(string(body), "the network is down") {
		t.Errorf("/readyz without a route: %d %q", code, body)
	}
	if r := ask(t, "udp", s.udp, wiretest.Query("example.com.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("a query without a route: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	// The upstream stays healthy, and its actor probes it again.
	if e := next(t, events, "wan"); e.outcome != actors.OutcomeLocalError || e.st.InBackoff {
		t.Fatalf("the next probe without a route: %v, in backoff %v", e.outcome, e.st.InBackoff)
	}
	if code, h := s.health(t); code != http.StatusServiceUnavailable || h.Reason != admin.ReasonNetwork {
		t.Fatalf("/api/health still without a route: %s %q (%d)", h.Status, h.Reason, code)
	}

	// A route returns: the first probe after it answers, and the report
	// says so. The probes that ended before it (every backoff_ms while the
	// checks above ran: several on a loaded machine) are dropped first;
	// one may still end, unanswered, between the drain and the route.
	for drained := false; !drained; {
		select {
		case <-events:
		default:
			drained = true
		}
	}
	ipAddr(t, "add")
	for i := 0; ; i++ {
		e := next(t, events, "wan")
		if e.outcome == actors.OutcomeAnswer {
			break
		}
		if e.outcome != actors.OutcomeLocalError || i > 0 {
			t.Fatalf("probe %d after the route returned: %v, want an answer", i+1, e.outcome)
		}
	}
	code, h = s.health(t)
	if code != http.StatusOK || h.Status != admin.StatusOK || h.Reason != "" {
		t.Fatalf("/api/health with the route back: %s %q (%d), want ok (200)", h.Status, h.Reason, code)
	}
	if h.LastLocalError == nil {
		t.Error("the last local error is no longer shown once the route is back")
	}
	if code, body := s.get(t, "/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with the route back: %d %q", code, body)
	}
	if r := ask(t, "udp", s.udp, wiretest.Query("example.com.", dns.TypeA)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("a query with the route back: %s, %d answers", dns.RcodeToString[r.Rcode], len(r.Answer))
	}

	// The route goes again: a client's query finds it gone, and the
	// report says so before any probe.
	ipAddr(t, "del")
	if r := ask(t, "udp", s.udp, wiretest.Query("example.org.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("a query after the route went: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	if code, h := s.health(t); code != http.StatusServiceUnavailable || h.Reason != admin.ReasonNetwork {
		t.Errorf("/api/health after a client's query found no route: %s %q (%d), want down, network", h.Status, h.Reason, code)
	}
}
