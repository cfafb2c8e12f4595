package server

import (
	"testing"

	"github.com/miekg/dns"
)

// Over TCP and DoT, as over UDP, what the FastHandler can answer is
// answered on the connection's read loop (no goroutine per cache hit),
// the rest goes to ServeDNS with the handler's State, and a panic in the
// fast path is answered SERVFAIL with the connection served on. Before
// the streams had a fast path every query went to ServeDNS: fast 0.
func TestStreamFastPath(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	h := &fastEcho{}
	s := &Server{Handler: h}
	dot, _ := startEncrypted(t, s, ca)
	_, tcp := s.Addrs()
	conns := map[string]*dns.Conn{
		"tcp": dialDNS(t, "tcp", tcp[0].String()),
		"tls": {Conn: dialDoT(t, dot, ca.clientConfig())},
	}
	for proto, c := range conns {
		for range 3 {
			if r := exchangeOn(t, c, queryFor("a.fast.")); r.Rcode != dns.RcodeSuccess || r.Answer[0].(*dns.TXT).Txt[0] != proto {
				t.Fatalf("%s fast answer: %v", proto, r)
			}
			if r := exchangeOn(t, c, queryFor("slow.example.")); r.Rcode != dns.RcodeSuccess {
				t.Fatalf("%s handed-on answer: %v", proto, r)
			}
		}
		if r := exchangeOn(t, c, queryFor("boom.fast.")); r.Rcode != dns.RcodeServerFailure {
			t.Fatalf("%s: a panic in the fast path: %s, want SERVFAIL", proto, dns.RcodeToString[r.Rcode])
		}
		if r := exchangeOn(t, c, queryFor("b.fast.")); r.Rcode != dns.RcodeSuccess {
			t.Fatalf("%s: after the panic the connection answers %s", proto, dns.RcodeToString[r.Rcode])
		}
	}
	if h.fast.Load() != 8 || h.slow.Load() != 6 || h.stateCarried.Load() != 6 {
		t.Errorf("fast %d, handed on %d (state carried %d); want 8, 6 (6)", h.fast.Load(), h.slow.Load(), h.stateCarried.Load())
	}
}
