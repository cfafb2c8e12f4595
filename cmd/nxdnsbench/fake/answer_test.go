package fake

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

func pack(tb testing.TB, m *dns.Msg) []byte {
	tb.Helper()
	b, err := m.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// respond runs Respond on a packed query and unpacks the answer.
func respond(tb testing.TB, q *dns.Msg, rcode int) *dns.Msg {
	tb.Helper()
	raw := pack(tb, q)
	b := make([]byte, len(raw)+Headroom)
	copy(b, raw)
	n := Respond(b, len(raw), rcode)
	if n == 0 {
		tb.Fatalf("Respond dropped %v", q.Question)
	}
	r := new(dns.Msg)
	if err := r.Unpack(b[:n]); err != nil {
		tb.Fatalf("answer does not parse: %v", err)
	}
	return r
}

func TestRespond(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		qtype   uint16
		edns    bool
		rcode   int
		answers int
		want    string // the answer's RDATA, or ""
	}{
		{"A", dns.TypeA, false, 0, 1, "192.0.2.1"},
		{"A with EDNS", dns.TypeA, true, 0, 1, "192.0.2.1"},
		{"AAAA with EDNS", dns.TypeAAAA, true, 0, 1, "2001:db8::1"},
		{"MX is NODATA", dns.TypeMX, true, 0, 0, ""},
		{"refused", dns.TypeA, true, dns.RcodeRefused, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := new(dns.Msg).SetQuestion("q12345.bench.example.", tt.qtype)
			if tt.edns {
				q.SetEdns0(1232, true)
			}
			r := respond(t, q, tt.rcode)
			switch {
			case r.Id != q.Id || !r.Response || !r.RecursionAvailable || !r.RecursionDesired:
				t.Fatalf("header %+v", r.MsgHdr)
			case r.Rcode != tt.rcode:
				t.Fatalf("rcode %d, want %d", r.Rcode, tt.rcode)
			case len(r.Question) != 1 || r.Question[0] != q.Question[0]:
				t.Fatalf("question %v, want %v", r.Question, q.Question)
			case len(r.Answer) != tt.answers:
				t.Fatalf("answers %v, want %d", r.Answer, tt.answers)
			case (r.IsEdns0() != nil) != tt.edns:
				t.Fatalf("OPT %v, want EDNS %v", r.IsEdns0(), tt.edns)
			case tt.edns && (r.IsEdns0().UDPSize() != 1232 || !r.IsEdns0().Do()):
				t.Fatalf("OPT %v not echoed", r.IsEdns0())
			}
			if tt.want == "" {
				return
			}
			a := r.Answer[0]
			if a.Header().Name != q.Question[0].Name || a.Header().Rrtype != tt.qtype {
				t.Fatalf("answer %v for %v", a, q.Question[0])
			}
			var ip net.IP
			switch rr := a.(type) {
			case *dns.A:
				ip = rr.A
			case *dns.AAAA:
				ip = rr.AAAA
			}
			if ip.String() != tt.want {
				t.Fatalf("answer %v, want %s", a, tt.want)
			}
		})
	}
}

func TestRespondDropsResponsesAndRejectsOddQueries(t *testing.T) {
	t.Parallel()
	q := new(dns.Msg).SetQuestion("example.", dns.TypeA)
	q.Response = true
	raw := pack(t, q)
	b := make([]byte, len(raw)+Headroom)
	copy(b, raw)
	if n := Respond(b, len(raw), 0); n != 0 {
		t.Fatalf("a response was answered: %d bytes", n)
	}
	if n := Respond(b, headerLen-1, 0); n != 0 {
		t.Fatalf("a short datagram was answered: %d bytes", n)
	}

	two := new(dns.Msg).SetQuestion("example.", dns.TypeA)
	two.Question = append(two.Question, two.Question[0])
	if r := respond(t, two, 0); r.Rcode != dns.RcodeFormatError || len(r.Question) != 0 {
		t.Fatalf("two questions: %v", r)
	}
}

// BenchmarkRespond is the fake's whole per-query CPU cost outside the
// socket calls; it must not allocate.
func BenchmarkRespond(b *testing.B) {
	raw := pack(b, new(dns.Msg).SetQuestion("q12345.bench.example.", dns.TypeA).SetEdns0(1232, false))
	buf := make([]byte, len(raw)+Headroom)
	b.ReportAllocs()
	for b.Loop() {
		copy(buf, raw)
		if Respond(buf, len(raw), 0) == 0 {
			b.Fatal("dropped")
		}
	}
}
