package query

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// testRecords are the local records of the local-record tests, all inside
// the forward zone lan. to prove that they win over it, in the form the
// configuration's validation builds them (lower-case, fully qualified: a
// record configured in mixed case is config's test, TestParsedRecords).
func testRecords(tb testing.TB) []Record {
	return mustRRs(tb,
		"nas.lan. 300 IN A 192.168.1.10",
		`nas.lan. 300 IN TXT "storage"`,
		"multi.lan. 60 IN A 192.168.1.21",
		"multi.lan. 60 IN A 192.168.1.22",
		"multi.lan. 60 IN AAAA fd00::22",
		"www.lan. 120 IN CNAME nas.lan.",
		"alias.lan. 120 IN CNAME www.lan.",
		"out.lan. 120 IN CNAME example.com.",
		"loop1.lan. 1 IN CNAME loop2.lan.",
		"loop2.lan. 1 IN CNAME loop1.lan.",
		"10.1.168.192.in-addr.arpa. 300 IN PTR nas.lan.",
		"mixed.case.lan. 30 IN AAAA 2001:db8::1",
	)
}

func TestServeLocalRecords(t *testing.T) {
	t.Parallel()
	const (
		nasA     = "nas.lan.\t300\tIN\tA\t192.168.1.10"
		nasTXT   = "nas.lan.\t300\tIN\tTXT\t\"storage\""
		wwwCNAME = "www.lan.\t120\tIN\tCNAME\tnas.lan."
	)
	tests := []struct {
		name   string
		qname  string
		qtype  uint16
		qclass uint16
		answer []string
	}{
		{name: "A", qname: "nas.lan.", qtype: dns.TypeA, answer: []string{nasA}},
		{name: "case-insensitive", qname: "NaS.LAN.", qtype: dns.TypeA, answer: []string{nasA}},
		{name: "other type is NODATA", qname: "nas.lan.", qtype: dns.TypeAAAA},
		{name: "TXT", qname: "nas.lan.", qtype: dns.TypeTXT, answer: []string{nasTXT}},
		{name: "ANY", qname: "nas.lan.", qtype: dns.TypeANY, answer: []string{nasA, nasTXT}},
		{name: "several records of one type", qname: "multi.lan.", qtype: dns.TypeA, answer: []string{
			"multi.lan.\t60\tIN\tA\t192.168.1.21", "multi.lan.\t60\tIN\tA\t192.168.1.22"}},
		{name: "CNAME followed to a local A", qname: "www.lan.", qtype: dns.TypeA, answer: []string{wwwCNAME, nasA}},
		{name: "CNAME answers any type", qname: "www.lan.", qtype: dns.TypeMX, answer: []string{wwwCNAME}},
		{name: "CNAME asked for itself", qname: "www.lan.", qtype: dns.TypeCNAME, answer: []string{wwwCNAME}},
		{name: "CNAME chain", qname: "alias.lan.", qtype: dns.TypeA, answer: []string{
			"alias.lan.\t120\tIN\tCNAME\twww.lan.", wwwCNAME, nasA}},
		{name: "CNAME out of the local records", qname: "out.lan.", qtype: dns.TypeA, answer: []string{
			"out.lan.\t120\tIN\tCNAME\texample.com."}},
		{name: "CNAME loop ends", qname: "loop1.lan.", qtype: dns.TypeA, answer: []string{
			"loop1.lan.\t1\tIN\tCNAME\tloop2.lan.", "loop2.lan.\t1\tIN\tCNAME\tloop1.lan."}},
		{name: "PTR", qname: "10.1.168.192.in-addr.arpa.", qtype: dns.TypePTR, answer: []string{
			"10.1.168.192.in-addr.arpa.\t300\tIN\tPTR\tnas.lan."}},
		{name: "asked in mixed case", qname: "Mixed.CASE.lan.", qtype: dns.TypeAAAA, answer: []string{
			"mixed.case.lan.\t30\tIN\tAAAA\t2001:db8::1"}},
		{name: "class CH holds nothing", qname: "nas.lan.", qtype: dns.TypeA, qclass: dns.ClassCHAOS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			zone := resolverAnswering(t, dns.RcodeRefused)
			pool := &fakePool{}
			h, rec := newTestHandler(t, HandlerConfig{
				Pool:    pool,
				Records: testRecords(t),
				Zones:   []Zone{{Name: "lan.", Resolver: "192.168.1.1:53", Client: zone}},
			})
			q := newQuery(tt.qname, tt.qtype)
			if tt.qclass != 0 {
				q.Question[0].Qclass = tt.qclass
			}
			m, _ := exchange(t, h, q, ProtoUDP)
			checkEcho(t, q, m)
			if m.Rcode != dns.RcodeSuccess || !m.Authoritative {
				t.Errorf("rcode %s AA %v, want NOERROR and AA", dns.RcodeToString[m.Rcode], m.Authoritative)
			}
			if got := rrStrings(m.Answer); !slices.Equal(got, tt.answer) {
				t.Errorf("answer =\n%q\nwant\n%q", got, tt.answer)
			}
			if len(m.Ns)+len(m.Extra) != 0 {
				t.Errorf("authority %v additional %v, want none (no EDNS asked)", m.Ns, m.Extra)
			}
			if zone.Calls()+pool.Calls() != 0 {
				t.Errorf("zone asked %d times, pool %d: want neither", zone.Calls(), pool.Calls())
			}
			if e := rec.only(t); e.Source != SourceLocal || e.Upstream != "" || e.Rcode != dns.RcodeSuccess {
				t.Errorf("entry = %+v, want source local, no upstream, NOERROR", e)
			}
		})
	}
}

// Local names match exactly: a name below one is not local.
func TestServeLocalExactOnly(t *testing.T) {
	t.Parallel()
	pool := answeringPool(t)
	h, rec := newTestHandler(t, HandlerConfig{Pool: pool, Records: testRecords(t)})
	exchange(t, h, newQuery("sub.nas.lan.", dns.TypeA), ProtoUDP)
	if pool.Calls() != 1 || rec.only(t).Source != SourcePool {
		t.Errorf("pool asked %d times, want sub.nas.lan. resolved by the pool", pool.Calls())
	}
}

// A TXT record's strings go out as the record holds them, one
// character-string each; escapes in them are dns.TXT's, which config's
// validation writes (TestParsedTXTPacksTheText).
func TestServeLocalTXT(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("0123456789", 30) // 300 bytes: two strings on the wire
	hdr := func(name string) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}
	}
	h, _ := newTestHandler(t, HandlerConfig{Records: []Record{
		&dns.TXT{Hdr: hdr("long.lan."), Txt: []string{long[:255], long[255:]}},
		&dns.TXT{Hdr: hdr("path.lan."), Txt: []string{`C:\\dir "x"`}},
		&dns.TXT{Hdr: hdr("empty.lan."), Txt: []string{""}},
	}})
	tests := []struct {
		qname string
		want  []string // as miekg/dns presents the strings it unpacked
	}{
		{"long.lan.", []string{long[:255], long[255:]}},
		{"path.lan.", []string{`C:\\dir \"x\"`}}, // one backslash on the wire, escaped on unpacking
		{"empty.lan.", []string{""}},
	}
	for _, tt := range tests {
		m, _ := exchange(t, h, newQuery(tt.qname, dns.TypeTXT), "tcp")
		if len(m.Answer) != 1 {
			t.Fatalf("%s: answer %v, want one TXT", tt.qname, m.Answer)
		}
		if got := m.Answer[0].(*dns.TXT).Txt; !slices.Equal(got, tt.want) {
			t.Errorf("%s: TXT strings %q, want %q", tt.qname, got, tt.want)
		}
	}
}

func TestNewHandlerRejects(t *testing.T) {
	t.Parallel()
	okZone := Zone{Name: "lan.", Resolver: "192.168.1.1:53", Client: resolverAnswering(t, 0)}
	tests := []struct {
		name string
		cfg  HandlerConfig
		want error
	}{
		{"no pool", HandlerConfig{}, ErrNoPool},
		// Record values, names and the CNAME rule are config's to check
		// (config/validate_test.go); the table refuses what it cannot hold.
		{"nil record", HandlerConfig{Records: []Record{nil}}, ErrBadRecord},
		{"unsupported type", HandlerConfig{Records: mustRRs(t, "a.lan. 60 IN MX 10 mx.lan.")}, ErrBadRecord},
		{"zone listed twice", HandlerConfig{Zones: []Zone{okZone, {Name: "LAN", Resolver: "192.168.1.2:53", Client: okZone.Client}}}, ErrBadZone},
		{"zone without client", HandlerConfig{Zones: []Zone{{Name: "lan.", Resolver: "192.168.1.1:53"}}}, ErrBadZone},
		{"bad zone name", HandlerConfig{Zones: []Zone{{Name: "", Client: okZone.Client}}}, ErrBadZone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.want != ErrNoPool {
				tt.cfg.Pool = &fakePool{}
			}
			h, err := NewHandler(tt.cfg)
			if !errors.Is(err, tt.want) {
				t.Errorf("NewHandler = %v, %v; want an error matching %v", h, err, tt.want)
			}
		})
	}
}
