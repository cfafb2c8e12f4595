package cache

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// t0 is the tests' clock at the start: a wall-clock instant, as the
// query path's would be.
var t0 = time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)

// testConfig is the spec's defaults, with a small bound.
func testConfig() Config {
	return Config{
		MaxBytes:       1 << 20,
		MinTTL:         0,
		MaxTTL:         86400 * time.Second,
		NegativeMaxTTL: 3600 * time.Second,
		FailureTTL:     5 * time.Second,
		StaleMaxAge:    86400 * time.Second,
	}
}

// msg is an answer to name's qtype question, as an upstream sends it.
type msg struct {
	name     string
	qtype    uint16
	rcode    int
	an, ns   []string
	extra    []string
	opt      bool // with an OPT record (DO set)
	tc       bool
	id       uint16
	compress bool
}

// fataler is what the helpers need of a testing.TB or a *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func (m msg) pack(tb fataler) []byte {
	tb.Helper()
	d := new(dns.Msg)
	d.SetQuestion(m.name, m.qtype)
	d.Response, d.RecursionAvailable = true, true
	d.Id = m.id
	d.Rcode = m.rcode
	d.Truncated = m.tc
	d.Compress = m.compress
	rrs := func(ss []string) []dns.RR {
		var out []dns.RR
		for _, s := range ss {
			rr, err := dns.NewRR(s)
			if err != nil {
				tb.Fatalf("NewRR(%q): %v", s, err)
			}
			out = append(out, rr)
		}
		return out
	}
	d.Answer, d.Ns, d.Extra = rrs(m.an), rrs(m.ns), rrs(m.extra)
	if m.opt {
		d.SetEdns0(1232, true)
	}
	b, err := d.Pack()
	if err != nil {
		tb.Fatalf("Pack: %v", err)
	}
	return b
}

// keyOf is the key the query path makes for m's question.
func keyOf(m msg) Key {
	return Key{Name: strings.ToLower(m.name), Type: m.qtype, Class: dns.ClassINET}
}

// unpack parses b or fails the test.
func unpack(tb testing.TB, b []byte) *dns.Msg {
	tb.Helper()
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		tb.Fatalf("Unpack: %v", err)
	}
	return m
}

// get returns k's answer at now as AppendAnswer writes it, parsed, and the
// state; nil when there is no answer.
func get(tb testing.TB, c *Cache, k Key, now time.Time, staleTTL uint32) (*dns.Msg, State) {
	tb.Helper()
	h, st := c.Get(k, now)
	if st == Miss || st == Failure {
		return nil, st
	}
	return unpack(tb, h.AppendAnswer(nil, 7, nil, now, staleTTL)), st
}

var example = msg{
	name:  "www.Example.com.",
	qtype: dns.TypeA,
	an: []string{
		"www.example.com. 300 IN CNAME web.example.com.",
		"web.example.com. 120 IN A 192.0.2.1",
		"web.example.com. 120 IN A 192.0.2.2",
	},
	ns:       []string{"example.com. 3600 IN NS ns1.example.com."},
	extra:    []string{"ns1.example.com. 3600 IN A 192.0.2.53"},
	opt:      true,
	compress: true,
}

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }
