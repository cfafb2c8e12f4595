package query

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
)

// ede returns the Extended DNS Errors of m's OPT record.
func ede(m *dns.Msg) []*dns.EDNS0_EDE {
	var out []*dns.EDNS0_EDE
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				out = append(out, e)
			}
		}
	}
	return out
}

func failingPool(res actors.Result) *fakePool {
	return &fakePool{OnExchange: func(context.Context, *dns.Msg, []actors.Attempt) actors.Result { return res }}
}

// A pool that ends without an answer says why, upstream by upstream, to a
// client that speaks EDNS: 22 No Reachable Authority, or 23 Network Error
// when the failure was ours. A client without EDNS gets a plain SERVFAIL.
func TestPoolFailureCarriesEDE(t *testing.T) {
	t.Parallel()
	trail := []actors.Attempt{
		{Upstream: "quad9", Outcome: actors.OutcomeExpired, Duration: 2500 * time.Millisecond},
		{Upstream: "cloudflare", Outcome: actors.OutcomePeerFault, Duration: time.Millisecond},
	}
	for _, tt := range []struct {
		name string
		res  actors.Result
		code uint16
		text string
	}{
		{"every upstream failed", actors.Result{Err: actors.ErrAllFailed, Upstream: "cloudflare", Attempts: trail}, 22, "quad9: expired; cloudflare: peer_fault"},
		{"budget gone in a slot wait", actors.Result{Err: actors.ErrBudgetExhausted}, 22, "no upstream could take the query in time"},
		{"a local error", actors.Result{Err: syscall.EMFILE, Attempts: []actors.Attempt{{Upstream: "quad9", Outcome: actors.OutcomeLocalError}}}, 23, "quad9: local_error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, _ := newTestHandler(t, HandlerConfig{Pool: failingPool(tt.res)})
			m, _ := exchange(t, h, withEDNS(newQuery("example.com.", dns.TypeA), 1232, false), ProtoUDP)
			got := ede(m)
			if m.Rcode != dns.RcodeServerFailure || len(got) != 1 || got[0].InfoCode != tt.code || got[0].ExtraText != tt.text {
				t.Fatalf("rcode %s, EDE %v; want SERVFAIL with EDE %d %q", dns.RcodeToString[m.Rcode], got, tt.code, tt.text)
			}
			m, _ = exchange(t, h, newQuery("example.com.", dns.TypeA), ProtoUDP)
			if m.Rcode != dns.RcodeServerFailure || m.IsEdns0() != nil {
				t.Errorf("without EDNS: rcode %s, OPT %v; want SERVFAIL without OPT", dns.RcodeToString[m.Rcode], m.IsEdns0())
			}
		})
	}
}

// A forward zone whose resolver fails names it in an EDE 22.
func TestZoneFailureCarriesEDE(t *testing.T) {
	t.Parallel()
	h, _ := newTestHandler(t, HandlerConfig{Zones: []Zone{{Name: "lan.", Resolver: "192.168.1.1:53", Client: resolverFailing(context.DeadlineExceeded)}}})
	m, _ := exchange(t, h, withEDNS(newQuery("nas.lan.", dns.TypeA), 1232, false), ProtoUDP)
	if got := ede(m); m.Rcode != dns.RcodeServerFailure || len(got) != 1 || got[0].InfoCode != 22 || got[0].ExtraText != "192.168.1.1:53: timeout" {
		t.Fatalf("rcode %s, EDE %v; want SERVFAIL with EDE 22 naming the resolver", dns.RcodeToString[m.Rcode], got)
	}
}

// An EDE never makes an answer exceed the client's UDP size: with 30
// upstreams named in it, a 512-byte client gets the SERVFAIL without it,
// and without TC (nothing of the answer had to go).
func TestEDEDroppedBeforeTheAnswerOutgrowsTheClient(t *testing.T) {
	t.Parallel()
	var trail []actors.Attempt
	for i := range 30 { // about 750 bytes of EXTRA-TEXT
		trail = append(trail, actors.Attempt{Upstream: strings.Repeat("u", 10) + string(rune('A'+i%26)), Outcome: actors.OutcomePeerFault})
	}
	h, _ := newTestHandler(t, HandlerConfig{Pool: failingPool(actors.Result{Err: actors.ErrAllFailed, Attempts: trail})})
	m, out := exchange(t, h, withEDNS(newQuery("example.com.", dns.TypeA), 512, false), ProtoUDP)
	if len(out) > 512 || len(ede(m)) != 0 || m.Truncated || m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("%d bytes, EDE %v, TC %v, rcode %s; want a SERVFAIL within 512 bytes without EDE or TC",
			len(out), ede(m), m.Truncated, dns.RcodeToString[m.Rcode])
	}
	m, _ = exchange(t, h, withEDNS(newQuery("example.com.", dns.TypeA), 1232, false), ProtoUDP)
	if len(ede(m)) != 1 {
		t.Errorf("a 1232-byte client lost the EDE: %v", ede(m))
	}
}
