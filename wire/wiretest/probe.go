package wiretest

import (
	"sync/atomic"

	"github.com/miekg/dns"
)

// nxdnsd's upstream actors send every upstream a health probe, a query for
// ". NS", at start-up and whenever a backoff ends. The fakes keep probes
// apart from a test's queries: a probe does not reach the test's Handler
// and is not counted in UDPQueries, TCPQueries or Queries, so a test of
// forwarding sees only its own queries. Each fake answers probes itself
// unless the test gives it a probe handler (HandleProbes), and counts them
// (Probes).

// IsProbe reports whether q is a health probe: one question, ". NS".
func IsProbe(q *dns.Msg) bool {
	return len(q.Question) == 1 && q.Question[0].Name == "." && q.Question[0].Qtype == dns.TypeNS
}

// probes is a fake's probe handling.
type probes struct {
	n      atomic.Int64
	h      atomic.Pointer[Handler] // nil: answerProbe
	checks atomic.Int64            // loop checks (loopcheck.go)
}

// serve runs the probe handler on q, a probe.
func (p *probes) serve(w *Writer, q *dns.Msg) {
	if h := p.h.Load(); h != nil {
		(*h)(w, q)
		return
	}
	answerProbe(w, q)
}

func (p *probes) set(h Handler) {
	if h == nil {
		p.h.Store(nil)
		return
	}
	p.h.Store(&h)
}

// answerProbe answers a probe as a resolver would, with the root's NS
// set (one server of it is enough for a fake).
func answerProbe(w *Writer, q *dns.Msg) {
	r := new(dns.Msg).SetReply(q)
	r.Answer = []dns.RR{&dns.NS{
		Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: 518400},
		Ns:  "a.root-servers.net.",
	}}
	w.WriteMsg(r)
}

// HandleProbes makes h serve the health probes the server receives from
// now on; nil restores the default, an answer. It is safe to call while
// the server runs: a test kills an upstream's probes and revives them.
func (s *Server) HandleProbes(h Handler) { s.probes.set(h) }

// Probes returns the number of health probes received, over UDP and TCP.
func (s *Server) Probes() int64 { return s.probes.n.Load() }

// HandleProbes is Server.HandleProbes for a DoT server.
func (s *DoTServer) HandleProbes(h Handler) { s.core.probes.set(h) }

// Probes returns the number of health probes received.
func (s *DoTServer) Probes() int64 { return s.core.probes.n.Load() }

// HandleProbes is Server.HandleProbes for a DoH server. Probes are HTTP
// requests like any other: Requests counts them.
func (s *DoHServer) HandleProbes(h Handler) { s.core.probes.set(h) }

// Probes returns the number of health probes received.
func (s *DoHServer) Probes() int64 { return s.core.probes.n.Load() }

// dispatch answers a loop check, runs the probe handling for a probe and
// h for anything else.
func (s *Server) dispatch(h Handler, w *Writer, q *dns.Msg) {
	if IsLoopCheck(q) {
		answerLoopCheck(w, q)
		return
	}
	if IsProbe(q) {
		s.probes.serve(w, q)
		return
	}
	h(w, q)
}

// count counts q, which parsed, as a probe or in queries.
func (s *Server) count(queries *atomic.Int64, q *dns.Msg) {
	if IsLoopCheck(q) {
		s.probes.checks.Add(1)
		return
	}
	if IsProbe(q) {
		s.probes.n.Add(1)
		return
	}
	queries.Add(1)
}
