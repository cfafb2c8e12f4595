package query

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// bigAnswer is 100 A records: about 1.6 KB on the wire, compressed.
func bigAnswer() []string {
	rrs := make([]string, 100)
	for i := range rrs {
		rrs[i] = fmt.Sprintf("big.example.\t60\tIN\tA\t10.0.%d.%d", i/250, i%250+1)
	}
	return rrs
}

func TestServeTruncation(t *testing.T) {
	t.Parallel()
	all := bigAnswer()
	tests := []struct {
		name    string
		proto   string
		edns    bool
		size    uint16
		limit   int // the answer's most bytes
		whole   bool
		wantOPT bool
	}{
		{name: "UDP without EDNS", proto: ProtoUDP, limit: 512},
		{name: "UDP with EDNS 1232", proto: ProtoUDP, edns: true, size: 1232, limit: 1232, wantOPT: true},
		{name: "UDP with an EDNS size below 512", proto: ProtoUDP, edns: true, size: 100, limit: 512, wantOPT: true},
		{name: "UDP with EDNS 4096", proto: ProtoUDP, edns: true, size: 4096, limit: 1232, wantOPT: true},
		{name: "UDP with EDNS 1800", proto: ProtoUDP, edns: true, size: 1800, limit: 1232, wantOPT: true},
		{name: "TCP without EDNS", proto: "tcp", limit: dns.MaxMsgSize, whole: true},
		{name: "TCP with EDNS 512", proto: "tcp", edns: true, size: 512, limit: dns.MaxMsgSize, whole: true, wantOPT: true},
	}
	for _, tt := range tests {
		for _, kind := range poolKinds {
			t.Run(tt.name+"/"+kind.name, func(t *testing.T) {
				t.Parallel()
				h, rec := newTestHandler(t, HandlerConfig{Pool: kind.wrap(answeringPool(t, all...))})
				q := newQuery("Big.Example.", dns.TypeA)
				if tt.edns {
					withEDNS(q, tt.size, true)
				}
				m, out := exchange(t, h, q, tt.proto)
				checkEcho(t, q, m)
				if len(out) > tt.limit {
					t.Errorf("answer is %d bytes, want at most %d", len(out), tt.limit)
				}
				if m.Truncated == tt.whole {
					t.Errorf("TC = %v, want %v", m.Truncated, !tt.whole)
				}
				got := rrStrings(m.Answer)
				if tt.whole && len(got) != len(all) {
					t.Errorf("answer has %d records, want all %d", len(got), len(all))
				}
				if !tt.whole && (len(got) == 0 || len(got) == len(all)) {
					t.Errorf("truncated answer has %d records, want some but not all", len(got))
				}
				if !slices.Equal(got, all[:len(got)]) {
					t.Errorf("answer records are not the upstream's, in order")
				}
				opt := m.IsEdns0()
				if (opt != nil) != tt.wantOPT || (opt != nil && !opt.Do()) {
					t.Errorf("answer OPT = %v, want present %v with DO kept", opt, tt.wantOPT)
				}
				if e := rec.only(t); e.Rcode != dns.RcodeSuccess || e.Source != SourcePool {
					t.Errorf("entry = %+v, want a NOERROR pool answer", e)
				}
			})
		}
	}
}

// Answers built here are held to the client's size too.
func TestServeTruncatesLocalAnswers(t *testing.T) {
	t.Parallel()
	var recs []Record
	for i := range 10 {
		recs = append(recs, &dns.TXT{
			Hdr: dns.RR_Header{Name: "txt.lan.", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
			Txt: []string{fmt.Sprintf("%d%s", i, strings.Repeat("x", 99))},
		})
	}
	h, _ := newTestHandler(t, HandlerConfig{Records: recs})
	q := newQuery("txt.lan.", dns.TypeTXT)

	m, out := exchange(t, h, q, ProtoUDP)
	if len(out) > 512 || !m.Truncated || len(m.Answer) == 0 || len(m.Answer) == 10 {
		t.Errorf("over UDP: %d bytes, TC %v, %d records; want at most 512 bytes, TC and some records", len(out), m.Truncated, len(m.Answer))
	}
	m, _ = exchange(t, h, q, "tcp")
	if m.Truncated || len(m.Answer) != 10 {
		t.Errorf("over TCP: TC %v, %d records; want all 10", m.Truncated, len(m.Answer))
	}
}

// An upstream OPT that alone exceeds the client's size cannot be kept:
// the client gets the header and question with TC set, and retries over
// TCP.
func TestServeOversizedOPT(t *testing.T) {
	t.Parallel()
	pool := &fakePool{OnExchange: func(_ context.Context, q *dns.Msg, _ []actors.Attempt) actors.Result {
		m := new(dns.Msg)
		m.SetReply(q)
		m.Answer = mustRRs(t, "example.com. 60 IN A 192.0.2.1")
		m.SetEdns0(4096, true)
		opt := m.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_PADDING{Padding: make([]byte, 600)})
		return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "primary"}
	}}
	h, rec := newTestHandler(t, HandlerConfig{Pool: pool})
	q := withEDNS(newQuery("example.com.", dns.TypeA), 512, true)
	m, out := exchange(t, h, q, ProtoUDP)
	checkEcho(t, q, m)
	if len(out) > 512 || !m.Truncated || len(m.Answer)+len(m.Ns)+len(m.Extra) != 0 {
		t.Errorf("%d bytes, TC %v, sections %v %v %v; want a bare truncated answer of at most 512 bytes",
			len(out), m.Truncated, m.Answer, m.Ns, m.Extra)
	}
	if e := rec.only(t); e.Rcode != dns.RcodeSuccess {
		t.Errorf("entry rcode = %d, want NOERROR", e.Rcode)
	}
}
