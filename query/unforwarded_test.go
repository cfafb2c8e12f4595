package query

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"
)

// Zone transfers, meta-types and classes other than IN never reach the pool
// (issue 16: AXFR and IXFR went upstream over UDP, OPT, TSIG and TKEY as
// query types were forwarded, CH-class version.bind was forwarded). Before
// the fix the pool was asked for every one of them.
func TestServeNeverForwards(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		qname  string
		qtype  uint16
		qclass uint16
		rcode  int
		source string
		ede    bool // REFUSED says why, EDE 21
	}{
		{"AXFR", "example.com.", dns.TypeAXFR, dns.ClassINET, dns.RcodeRefused, SourceRefused, true},
		{"IXFR", "example.com.", dns.TypeIXFR, dns.ClassINET, dns.RcodeRefused, SourceRefused, true},
		{"OPT", "example.com.", dns.TypeOPT, dns.ClassINET, dns.RcodeFormatError, "", false},
		{"TSIG", "example.com.", dns.TypeTSIG, dns.ClassINET, dns.RcodeFormatError, "", false},
		{"meta 128", "example.com.", 128, dns.ClassINET, dns.RcodeFormatError, "", false},
		{"meta 248", "example.com.", 248, dns.ClassINET, dns.RcodeFormatError, "", false},
		{"TKEY", "example.com.", dns.TypeTKEY, dns.ClassINET, dns.RcodeNotImplemented, "", false},
		{"MAILA", "example.com.", dns.TypeMAILA, dns.ClassINET, dns.RcodeNotImplemented, "", false},
		{"MAILB", "example.com.", dns.TypeMAILB, dns.ClassINET, dns.RcodeNotImplemented, "", false},
		{"version.bind CH", "version.bind.", dns.TypeTXT, dns.ClassCHAOS, dns.RcodeRefused, SourceRefused, true},
		{"hostname.bind CH", "hostname.bind.", dns.TypeTXT, dns.ClassCHAOS, dns.RcodeRefused, SourceRefused, true},
		{"id.server CH", "id.server.", dns.TypeTXT, dns.ClassCHAOS, dns.RcodeRefused, SourceRefused, true},
		{"VERSION.BIND CH", "VERSION.BIND.", dns.TypeTXT, dns.ClassCHAOS, dns.RcodeRefused, SourceRefused, true},
		{"CH A", "example.com.", dns.TypeA, dns.ClassCHAOS, dns.RcodeRefused, SourceRefused, true},
		{"HS", "example.com.", dns.TypeA, dns.ClassHESIOD, dns.RcodeRefused, SourceRefused, true},
		{"class ANY", "example.com.", dns.TypeA, dns.ClassANY, dns.RcodeRefused, SourceRefused, true},
		{"class NONE", "example.com.", dns.TypeA, dns.ClassNONE, dns.RcodeRefused, SourceRefused, true},
		{"class 42", "example.com.", dns.TypeA, 42, dns.RcodeRefused, SourceRefused, true},
	}
	for _, tt := range tests {
		for _, proto := range []string{ProtoUDP, "tcp"} {
			// An option sends the query down the general parse path.
			for _, general := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/general=%v", tt.name, proto, general), func(t *testing.T) {
					t.Parallel()
					pool := answeringPool(t)
					h, rec := newTestHandler(t, HandlerConfig{Pool: pool})
					q := withEDNS(newQuery(tt.qname, tt.qtype), 1232, false)
					q.Question[0].Qclass = tt.qclass
					if general {
						opt := q.IsEdns0()
						opt.Option = append(opt.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
					}
					m, _ := exchange(t, h, q, proto)
					checkEcho(t, q, m)
					if pool.Calls() != 0 {
						t.Errorf("the pool was asked")
					}
					if m.Rcode != tt.rcode || len(m.Answer) != 0 {
						t.Errorf("answer %s with %d records, want %s and none",
							dns.RcodeToString[m.Rcode], len(m.Answer), dns.RcodeToString[tt.rcode])
					}
					if got := edeCode(m); tt.ede && got != edeNotSupported {
						t.Errorf("EDE %d, want %d (Not Supported)", got, edeNotSupported)
					}
					e := rec.only(t)
					if e.Source != tt.source || e.QClass != tt.qclass || e.QType != tt.qtype {
						t.Errorf("entry source %q, class %d, type %d; want %q, %d, %d",
							e.Source, e.QClass, e.QType, tt.source, tt.qclass, tt.qtype)
					}
				})
			}
		}
	}
}

// ANY, the one QTYPE of the meta range that is a question like any other,
// and ordinary types are forwarded as before, in class IN.
func TestServeForwardsANYAndDataTypes(t *testing.T) {
	t.Parallel()
	for _, qtype := range []uint16{dns.TypeANY, dns.TypeA, dns.TypeURI, dns.TypeCAA, 65280} {
		t.Run(dns.Type(qtype).String(), func(t *testing.T) {
			t.Parallel()
			pool := answeringPool(t)
			h, rec := newTestHandler(t, HandlerConfig{Pool: pool})
			m, _ := exchange(t, h, newQuery("example.com.", qtype), ProtoUDP)
			if pool.Calls() != 1 || m.Rcode != dns.RcodeSuccess {
				t.Errorf("%d pool calls, %s; want the pool's answer", pool.Calls(), dns.RcodeToString[m.Rcode])
			}
			if e := rec.only(t); e.QClass != dns.ClassINET || e.Source != SourcePool {
				t.Errorf("entry class %d, source %q; want IN from the pool", e.QClass, e.Source)
			}
		})
	}
}

// The names nxdnsd owns keep their answer in other classes (no data
// there), as before: the refusal is for what would be forwarded.
func TestServeOwnNamesInOtherClasses(t *testing.T) {
	t.Parallel()
	h, rec := newTestHandler(t, HandlerConfig{Pool: answeringPool(t)})
	q := newQuery("localhost.", dns.TypeA)
	q.Question[0].Qclass = dns.ClassCHAOS
	m, _ := exchange(t, h, q, ProtoUDP)
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || !m.Authoritative {
		t.Errorf("localhost. CH A: %s with %d records, AA %v; want authoritative NODATA",
			dns.RcodeToString[m.Rcode], len(m.Answer), m.Authoritative)
	}
	if e := rec.only(t); e.Source != SourceSpecial {
		t.Errorf("source %q, want special", e.Source)
	}
}

// edeCode is the INFO-CODE of m's first Extended DNS Error, 0 for none.
func edeCode(m *dns.Msg) uint16 {
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				return e.InfoCode
			}
		}
	}
	return 0
}
