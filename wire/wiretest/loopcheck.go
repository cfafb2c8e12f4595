package wiretest

import (
	"strings"

	"github.com/miekg/dns"
)

// nxdnsd's upstream actors also send every upstream a loop check in front
// of each probe: a query for a name under loop-check.nxdnsd.invalid.
// (actors/loop.go). The fakes answer it as an honest resolver does any
// name under invalid., NXDOMAIN, and keep it apart from a test's queries
// like a probe: it does not reach the test's Handler (nor its probe
// handler) and is counted in LoopChecks only.

// loopCheckZone is actors.LoopCheckZone (wiretest cannot import actors,
// whose tests import wiretest).
const loopCheckZone = ".loop-check.nxdnsd.invalid."

// IsLoopCheck reports whether q is an upstream actor's loop check.
func IsLoopCheck(q *dns.Msg) bool {
	return len(q.Question) == 1 && strings.HasSuffix(strings.ToLower(q.Question[0].Name), loopCheckZone)
}

// answerLoopCheck answers a loop check as a resolver that is not in a
// loop does.
func answerLoopCheck(w *Writer, q *dns.Msg) {
	w.WriteMsg(new(dns.Msg).SetRcode(q, dns.RcodeNameError))
}

// LoopChecks returns the number of loop checks received, over UDP and TCP.
func (s *Server) LoopChecks() int64 { return s.probes.checks.Load() }

// LoopChecks returns the number of loop checks received.
func (s *DoTServer) LoopChecks() int64 { return s.core.probes.checks.Load() }

// LoopChecks returns the number of loop checks received.
func (s *DoHServer) LoopChecks() int64 { return s.core.probes.checks.Load() }
