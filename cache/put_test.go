package cache

import (
	"testing"
	"time"

	"github.com/miekg/dns"
)

const soa = "example.com. %d IN SOA ns1.example.com. hostmaster.example.com. 1 7200 900 1209600 %d"

func soaRR(ttl, minimum int) string {
	return sprintf(soa, ttl, minimum)
}

// TestPutTTLRules is spec section 10's table: what is cached, for how
// long, and with which stored TTLs.
func TestPutTTLRules(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.MinTTL, cfg.MaxTTL = 60*time.Second, 3600*time.Second
	cfg.NegativeMaxTTL = 900 * time.Second

	tests := []struct {
		name string
		m    msg
		cfg  func(*Config)
		// life is the lifetime Put must give, 0 when it must not store.
		life uint32
		// ttls are the stored TTLs of every record but the OPT, in order.
		ttls []uint32
	}{{
		name: "positive: smallest TTL of answer and authority",
		m:    example,
		life: 120, ttls: []uint32{300, 120, 120, 3600, 3600},
	}, {
		name: "positive: additional records do not count",
		m: msg{name: "a.example.", qtype: dns.TypeA, an: []string{"a.example. 600 IN A 192.0.2.1"},
			extra: []string{"x.example. 70 IN A 192.0.2.9"}},
		life: 600, ttls: []uint32{600, 70},
	}, {
		name: "positive: raised to MinTTL",
		m:    msg{name: "a.example.", qtype: dns.TypeA, an: []string{"a.example. 5 IN A 192.0.2.1"}},
		life: 60, ttls: []uint32{60},
	}, {
		name: "positive: lowered to MaxTTL, every record",
		m: msg{name: "a.example.", qtype: dns.TypeA, an: []string{"a.example. 86400 IN A 192.0.2.1"},
			ns: []string{"example. 7200 IN NS ns.example."}, extra: []string{"ns.example. 1 IN A 192.0.2.2"}},
		life: 3600, ttls: []uint32{3600, 3600, 60},
	}, {
		name: "positive: zero TTL without MinTTL is not cached",
		m:    msg{name: "a.example.", qtype: dns.TypeA, an: []string{"a.example. 0 IN A 192.0.2.1"}},
		cfg:  func(c *Config) { c.MinTTL = 0 },
	}, {
		name: "positive: zero TTL raised by MinTTL",
		m:    msg{name: "a.example.", qtype: dns.TypeA, an: []string{"a.example. 0 IN A 192.0.2.1"}},
		life: 60, ttls: []uint32{60},
	}, {
		name: "positive: a TTL with the top bit set reads as 0",
		m:    msg{name: "a.example.", qtype: dns.TypeA, an: []string{"a.example. 2147483648 IN A 192.0.2.1"}},
		cfg:  func(c *Config) { c.MinTTL = 0 },
	}, {
		name: "NXDOMAIN: SOA TTL below MINIMUM",
		m:    msg{name: "nx.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaRR(300, 600)}},
		life: 300, ttls: []uint32{300},
	}, {
		name: "NXDOMAIN: MINIMUM below SOA TTL, stored as the SOA's TTL",
		m:    msg{name: "nx.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaRR(3600, 120)}},
		life: 120, ttls: []uint32{120},
	}, {
		name: "NXDOMAIN: capped by NegativeMaxTTL, not clamped by MinTTL",
		m:    msg{name: "nx.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaRR(86400, 86400)}},
		life: 900, ttls: []uint32{900},
	}, {
		name: "NXDOMAIN: below MinTTL stays",
		m:    msg{name: "nx.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaRR(30, 30)}},
		life: 30, ttls: []uint32{30},
	}, {
		name: "NXDOMAIN after a CNAME: other records as they came",
		m: msg{name: "alias.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError,
			an: []string{"alias.example.com. 10 IN CNAME gone.example.com."}, ns: []string{soaRR(300, 300)}},
		life: 300, ttls: []uint32{10, 300},
	}, {
		name: "NXDOMAIN without SOA is not cached",
		m:    msg{name: "nx.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
	}, {
		name: "NXDOMAIN with SOA in the answer section only is not cached",
		m:    msg{name: "example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, an: []string{soaRR(300, 300)}},
	}, {
		name: "NXDOMAIN with a zero MINIMUM is not cached",
		m:    msg{name: "nx.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaRR(300, 0)}},
	}, {
		name: "NODATA with SOA",
		m:    msg{name: "www.example.com.", qtype: dns.TypeAAAA, ns: []string{soaRR(600, 60)}},
		life: 60, ttls: []uint32{60},
	}, {
		name: "NODATA without SOA is not cached",
		m:    msg{name: "www.example.com.", qtype: dns.TypeAAAA, ns: []string{"example.com. 600 IN NS ns.example.com."}},
	}, {
		name: "negative caching off",
		m:    msg{name: "nx.example.com.", qtype: dns.TypeA, rcode: dns.RcodeNameError, ns: []string{soaRR(300, 300)}},
		cfg:  func(c *Config) { c.NegativeMaxTTL = 0 },
	}, {
		name: "truncated",
		m:    msg{name: "a.example.", qtype: dns.TypeA, tc: true, an: []string{"a.example. 600 IN A 192.0.2.1"}},
	}, {
		name: "SERVFAIL",
		m:    msg{name: "a.example.", qtype: dns.TypeA, rcode: dns.RcodeServerFailure, ns: []string{soaRR(300, 300)}},
	}, {
		name: "REFUSED",
		m:    msg{name: "a.example.", qtype: dns.TypeA, rcode: dns.RcodeRefused, ns: []string{soaRR(300, 300)}},
	}, {
		name: "extended rcode BADVERS",
		m:    msg{name: "a.example.", qtype: dns.TypeA, rcode: dns.RcodeBadVers, opt: true, an: []string{"a.example. 600 IN A 192.0.2.1"}},
	}, {
		name: "DNSSEC records kept and clamped",
		m: msg{name: "a.example.", qtype: dns.TypeA, opt: true, an: []string{
			"a.example. 7200 IN A 192.0.2.1",
			"a.example. 7200 IN RRSIG A 13 2 7200 20261231000000 20261101000000 12345 example. dGVzdA==",
		}},
		life: 3600, ttls: []uint32{3600, 3600},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := cfg
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			c := New(cfg)
			k := keyOf(tt.m)
			stored := c.Put(k, tt.m.pack(t), t0)
			if stored != (tt.life > 0) {
				t.Fatalf("Put = %v, want %v", stored, tt.life > 0)
			}
			h, st := c.Get(k, t0)
			if tt.life == 0 {
				if st != Miss || c.Entries() != 0 || c.Bytes() != 0 {
					t.Fatalf("after a refused Put: %v, %d entries, %d bytes", st, c.Entries(), c.Bytes())
				}
				return
			}
			if st != Fresh {
				t.Fatalf("Get = %v, want Fresh", st)
			}
			if got := h.Lifetime(); got != time.Duration(tt.life)*time.Second {
				t.Errorf("Lifetime = %v, want %ds", got, tt.life)
			}
			if h.Rcode() != tt.m.rcode {
				t.Errorf("Rcode = %d, want %d", h.Rcode(), tt.m.rcode)
			}
			got := unpack(t, h.AppendAnswer(nil, 1, nil, t0, 0))
			var ttls []uint32
			for _, rr := range append(append(got.Answer, got.Ns...), got.Extra...) {
				if rr.Header().Rrtype == dns.TypeOPT {
					t.Fatalf("stored answer kept its OPT: %v", got)
				}
				ttls = append(ttls, rr.Header().Ttl)
			}
			if sprintf("%v", ttls) != sprintf("%v", tt.ttls) {
				t.Errorf("stored TTLs %v, want %v", ttls, tt.ttls)
			}
			// The lifetime ends the fresh state, to the second.
			if _, st := c.Get(k, t0.Add(time.Duration(tt.life)*time.Second-1)); st != Fresh {
				t.Errorf("a nanosecond before the lifetime ends: %v", st)
			}
			if _, st := c.Get(k, t0.Add(time.Duration(tt.life)*time.Second)); st != Stale {
				t.Errorf("at the lifetime's end: %v", st)
			}
		})
	}
}

// TestPutDeclines covers answers Put must not store whatever their TTLs.
func TestPutDeclines(t *testing.T) {
	t.Parallel()
	good := msg{name: "a.example.", qtype: dns.TypeA, an: []string{"a.example. 600 IN A 192.0.2.1"}}
	k := keyOf(good)
	two := new(dns.Msg)
	if err := two.Unpack(good.pack(t)); err != nil {
		t.Fatal(err)
	}
	two.Question = append(two.Question, two.Question[0])
	twoQ, _ := two.Pack()
	noQ := good.pack(t)
	noQ[5] = 0 // QDCOUNT 0: nothing walks right after
	query := good.pack(t)
	query[2] &^= 0x80 // QR clear

	tests := []struct {
		name string
		k    Key
		b    []byte
	}{
		{"two questions", k, twoQ},
		{"no question", k, noQ},
		{"a query", k, query},
		{"another name", Key{Name: "b.example.", Type: dns.TypeA, Class: dns.ClassINET}, good.pack(t)},
		{"another type", Key{Name: "a.example.", Type: dns.TypeAAAA, Class: dns.ClassINET}, good.pack(t)},
		{"another class", Key{Name: "a.example.", Type: dns.TypeA, Class: dns.ClassCHAOS}, good.pack(t)},
		{"cut short", k, good.pack(t)[:30]},
		{"trailing bytes", k, append(good.pack(t), 0)},
		{"empty", k, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := New(testConfig())
			if c.Put(tt.k, tt.b, t0) {
				t.Fatal("Put stored it")
			}
		})
	}
	if c := New(testConfig()); !c.Put(k, good.pack(t), t0) {
		t.Fatal("the good answer itself was not stored")
	}
}

// TestPutEscapedName: the key is in presentation format, the answer's
// question in wire format; escapes must match their bytes.
func TestPutEscapedName(t *testing.T) {
	t.Parallel()
	m := msg{name: `we\.ird\032Name\\.example.`, qtype: dns.TypeTXT, an: []string{`we\.ird\032name\\.example. 60 IN TXT "x"`}}
	c := New(testConfig())
	if !c.Put(keyOf(m), m.pack(t), t0) {
		t.Fatal("Put refused an escaped name")
	}
	if c.Put(Key{Name: `we.ird\032name\\.example.`, Type: dns.TypeTXT, Class: dns.ClassINET}, m.pack(t), t0) {
		t.Fatal("an unescaped dot matched an escaped one")
	}
}

// TestPutReplaces: a new answer replaces a fresh, a stale and a failure
// entry; a failure never replaces a fresh or stale answer.
func TestPutReplaces(t *testing.T) {
	t.Parallel()
	c := New(testConfig())
	k := keyOf(example)
	m2 := example
	m2.an = []string{"www.example.com. 300 IN A 192.0.2.99"}
	m2.ns, m2.extra = nil, nil

	c.Put(k, example.pack(t), t0)
	c.PutFailure(k, t0.Add(time.Second))
	if _, st := c.Get(k, t0.Add(time.Second)); st != Fresh {
		t.Fatalf("a failure replaced a fresh answer: %v", st)
	}
	c.PutFailure(k, t0.Add(200*time.Second))
	if _, st := c.Get(k, t0.Add(200*time.Second)); st != Stale {
		t.Fatalf("a failure replaced a stale answer: %v", st)
	}
	c.Put(k, m2.pack(t), t0.Add(200*time.Second))
	got, st := get(t, c, k, t0.Add(200*time.Second), 0)
	if st != Fresh || len(got.Answer) != 1 {
		t.Fatalf("a stale answer not replaced: %v %v", st, got)
	}
	c.Put(k, example.pack(t), t0.Add(201*time.Second))
	if got, _ := get(t, c, k, t0.Add(201*time.Second), 0); len(got.Answer) != 3 {
		t.Fatalf("a fresh answer not replaced: %v", got)
	}
	if c.Entries() != 1 {
		t.Fatalf("%d entries for one key", c.Entries())
	}

	// Past the stale window, a failure goes in, and an answer replaces it.
	late := t0.Add(201*time.Second + 120*time.Second + testConfig().StaleMaxAge)
	c.PutFailure(k, late)
	if _, st := c.Get(k, late); st != Failure {
		t.Fatalf("a failure after the stale window: %v", st)
	}
	c.Put(k, example.pack(t), late)
	if _, st := c.Get(k, late); st != Fresh {
		t.Fatalf("an answer did not replace a failure: %v", st)
	}
}
