package query

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/blocking"
	"github.com/nxdnsd/nxdnsd/blocking/blocktest"
	"github.com/nxdnsd/nxdnsd/cache"
	"github.com/nxdnsd/nxdnsd/clients"
	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/internal/cputime/cputimetest"
	"github.com/nxdnsd/nxdnsd/wire/server"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// newBlocking starts a blocking Manager on the [blocking] TOML src
// (validated as the daemon's is) and returns its Engine; the Manager
// stops when the test ends.
func newBlocking(tb testing.TB, src string) *blocking.Engine {
	tb.Helper()
	return newBlockingManager(tb, src).Engine()
}

// newBlockingManager is newBlocking's Manager, for a test that adds
// rules or pauses.
func newBlockingManager(tb testing.TB, src string) *blocking.Manager {
	tb.Helper()
	cfg, err := config.Parse([]byte("[[upstreams]]\naddress = \"udp://127.0.0.1:53\"\n" + src))
	if err != nil {
		tb.Fatalf("config:\n%v\n%s", err, src)
	}
	m := blocking.NewManager(blocking.Options{Config: cfg.Blocking})
	m.Start(context.Background())
	tb.Cleanup(m.Close)
	return m
}

// listFile writes a list in a test's directory and returns its path.
func listFile(tb testing.TB, lines ...string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "list.txt")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// exchangeFrom is exchange from client instead of testClient.
func exchangeFrom(tb testing.TB, h *Handler, client netip.AddrPort, q *dns.Msg, proto string) *dns.Msg {
	tb.Helper()
	raw, err := q.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	out := h.ServeDNS(context.Background(), &server.Request{Raw: raw, Proto: proto, Client: client, Answer: make([]byte, 0, 4096)})
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil {
		tb.Fatalf("the answer does not parse: %v", err)
	}
	return m
}

// blockedEDE returns the EXTRA-TEXT of m's EDE 15, and whether it has one.
func blockedEDE(m *dns.Msg) (string, bool) {
	opt := m.IsEdns0()
	if opt == nil {
		return "", false
	}
	for _, o := range opt.Option {
		if e, ok := o.(*dns.EDNS0_EDE); ok && e.InfoCode == dns.ExtendedErrorCodeBlocked {
			return e.ExtraText, true
		}
	}
	return "", false
}

// Each answer mode of spec section 11, for A, AAAA and another type, with
// and without EDNS: the rcode and records of the mode, an SOA with
// answer_ttl_s for NXDOMAIN and NODATA, EDE 15 naming the custom rules
// only with EDNS, never AD, and no upstream asked.
func TestBlockedAnswerModes(t *testing.T) {
	t.Parallel()
	type want struct {
		rcode  int
		answer string // the answer's one record, "" for none
		soa    bool
	}
	nodata := want{dns.RcodeSuccess, "", true}
	tests := []struct {
		mode     string
		a, aaaa  want
		mx       want
		answerIP string
	}{
		{"null", want{0, "0.0.0.0", false}, want{0, "::", false}, nodata, ""},
		{"nxdomain", want{dns.RcodeNameError, "", true}, want{dns.RcodeNameError, "", true}, want{dns.RcodeNameError, "", true}, ""},
		{"nodata", nodata, nodata, nodata, ""},
		{"refused", want{dns.RcodeRefused, "", false}, want{dns.RcodeRefused, "", false}, want{dns.RcodeRefused, "", false}, ""},
		{"ip", want{0, "192.0.2.80", false}, want{0, "2001:db8::80", false}, nodata, `"192.0.2.80", "2001:db8::80"`},
		{"ip", want{0, "192.0.2.80", false}, nodata, nodata, `"192.0.2.80"`},
	}
	for _, tt := range tests {
		t.Run(tt.mode+"/"+tt.answerIP, func(t *testing.T) {
			t.Parallel()
			e := newBlocking(t, fmt.Sprintf("[blocking]\nanswer = %q\nanswer_ip = [%s]\nanswer_ttl_s = 42\nblock = [\"||ads.example^\"]\n", tt.mode, tt.answerIP))
			pool := answeringPool(t, "x.ads.example. 300 IN A 192.0.2.1")
			h, rec := newTestHandler(t, HandlerConfig{Pool: pool, Blocking: e})
			for _, qt := range []struct {
				qtype uint16
				w     want
			}{{dns.TypeA, tt.a}, {dns.TypeAAAA, tt.aaaa}, {dns.TypeMX, tt.mx}} {
				for _, edns := range []bool{false, true} {
					q := newQuery("X.ads.example.", qt.qtype)
					q.AuthenticatedData = true
					if edns {
						withEDNS(q, 1232, true)
					}
					m, _ := exchange(t, h, q, ProtoUDP)
					name := fmt.Sprintf("%s edns=%v", dns.TypeToString[qt.qtype], edns)
					checkEcho(t, q, m)
					if m.Rcode != qt.w.rcode || m.AuthenticatedData || !m.RecursionAvailable {
						t.Errorf("%s: rcode %s AD %v RA %v, want %s, no AD, RA", name, dns.RcodeToString[m.Rcode], m.AuthenticatedData, m.RecursionAvailable, dns.RcodeToString[qt.w.rcode])
					}
					var got string
					if len(m.Answer) == 1 {
						switch rr := m.Answer[0].(type) {
						case *dns.A:
							got = rr.A.String()
						case *dns.AAAA:
							got = rr.AAAA.String()
						}
						if h := m.Answer[0].Header(); h.Ttl != 42 || h.Name != "X.ads.example." {
							t.Errorf("%s: record %v, want TTL 42 owned by the name asked", name, m.Answer[0])
						}
					}
					if got != qt.w.answer || len(m.Answer) > 1 {
						t.Errorf("%s: answers %v, want %q", name, m.Answer, qt.w.answer)
					}
					soa := len(m.Ns) == 1 && m.Ns[0].Header().Rrtype == dns.TypeSOA && m.Ns[0].Header().Ttl == 42 && m.Ns[0].(*dns.SOA).Minttl == 42
					if soa != qt.w.soa || len(m.Ns) > 1 {
						t.Errorf("%s: authority %v, want an SOA of TTL 42: %v", name, m.Ns, qt.w.soa)
					}
					text, ok := blockedEDE(m)
					if ok != edns || ok && text != "blocked by rule" {
						t.Errorf("%s: EDE 15 %v %q, want %v \"blocked by rule\"", name, ok, text, edns)
					}
					if edns && !m.IsEdns0().Do() {
						t.Errorf("%s: the DO bit is not echoed", name)
					}
					if en := rec.last(); en.Source != SourceBlocked || en.List != "rule" || en.Rcode != qt.w.rcode {
						t.Errorf("%s: entry source %q list %q rcode %d", name, en.Source, en.List, en.Rcode)
					}
				}
			}
			if pool.Calls() != 0 {
				t.Errorf("the pool was asked %d times for blocked names", pool.Calls())
			}
		})
	}
}

// A list's rule names the list; an Adblock exception in another list
// beats a hosts entry; a name below a hosts entry is not blocked; the
// groups decide per client: the kids' list blocks 127.0.0.2 only.
func TestBlockedByListPerClient(t *testing.T) {
	t.Parallel()
	hosts := listFile(t, "0.0.0.0 track.example", "0.0.0.0 ads.example")
	allow := listFile(t, "@@||track.example^")
	kids := listFile(t, "||games.example^")
	e := newBlocking(t, fmt.Sprintf(`
[[blocking.lists]]
name = "hosts"
source = %q
[[blocking.lists]]
name = "exceptions"
source = %q
[[blocking.lists]]
name = "kids"
source = %q
[[blocking.groups]]
name = "kids"
clients = ["127.0.0.2"]
lists = ["hosts", "exceptions", "kids"]
[[blocking.groups]]
name = "default"
lists = ["hosts", "exceptions"]
`, hosts, allow, kids))
	pool := answeringPool(t, "www.example. 300 IN A 192.0.2.1")
	h, rec := newTestHandler(t, HandlerConfig{Pool: pool, Blocking: e})
	one, two := netip.MustParseAddrPort("127.0.0.1:5000"), netip.MustParseAddrPort("127.0.0.2:5000")
	for _, tt := range []struct {
		client  netip.AddrPort
		name    string
		blocked string // the list, "" when not blocked
	}{
		{one, "ads.example.", "hosts"},
		{one, "www.ads.example.", ""},
		{one, "track.example.", ""},
		{two, "track.example.", ""},
		{one, "games.example.", ""},
		{two, "games.example.", "kids"},
		{two, "www.games.example.", "kids"},
	} {
		m := exchangeFrom(t, h, tt.client, withEDNS(newQuery(tt.name, dns.TypeA), 1232, false), ProtoUDP)
		text, ok := blockedEDE(m)
		en := rec.last()
		if tt.blocked == "" {
			if ok || en.Source != SourcePool {
				t.Errorf("%s from %s: EDE %q, source %q, want it forwarded", tt.name, tt.client, text, en.Source)
			}
			continue
		}
		if text != "blocked by "+tt.blocked || en.Source != SourceBlocked || en.List != tt.blocked {
			t.Errorf("%s from %s: EDE %q source %q list %q, want blocked by %s", tt.name, tt.client, text, en.Source, en.List, tt.blocked)
		}
	}
}

// CNAME inspection on fresh and cached answers, on both of the pool's
// paths: an answer whose chain names a blocked name is blocked for the
// client whose lists block it, naming that list, and served as it is to
// another client from the same cache entry. An allow rule for the name
// asked exempts the answer.
func TestCNAMEInspection(t *testing.T) {
	t.Parallel()
	kids := listFile(t, "||tracker.example^")
	e := newBlocking(t, fmt.Sprintf(`
[blocking]
allow = ["exempt.example"]
[[blocking.lists]]
name = "kids"
source = %q
[[blocking.groups]]
name = "kids"
clients = ["127.0.0.2"]
lists = ["kids"]
`, kids))
	one, two := netip.MustParseAddrPort("127.0.0.1:5000"), netip.MustParseAddrPort("127.0.0.2:5000")
	for _, kind := range poolKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			pool := answeringPool(t,
				"www.example. 300 IN CNAME cdn.example.",
				"cdn.example. 300 IN CNAME edge.tracker.example.",
				"edge.tracker.example. 300 IN A 192.0.2.1",
			)
			h, rec := newTestHandler(t, HandlerConfig{Pool: kind.wrap(pool), Blocking: e, Cache: testCacheConfig()})
			t.Cleanup(h.Close)
			for i, tt := range []struct {
				client  netip.AddrPort
				name    string
				blocked bool
				cache   string
			}{
				{two, "www.example.", true, CacheMiss}, // fresh
				{one, "www.example.", false, CacheHit}, // the same entry, another client
				{two, "www.example.", true, CacheHit},  // cached
				{two, "exempt.example.", false, CacheMiss},
			} {
				m := exchangeFrom(t, h, tt.client, withEDNS(newQuery(tt.name, dns.TypeA), 1232, false), ProtoUDP)
				en := rec.last()
				text, _ := blockedEDE(m)
				if tt.blocked {
					if text != "blocked by kids" || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "0.0.0.0" || en.Source != SourceBlocked || en.List != "kids" {
						t.Errorf("%d: %s from %s: EDE %q answers %v source %q list %q, want blocked by kids", i, tt.name, tt.client, text, m.Answer, en.Source, en.List)
					}
				} else if text != "" || len(m.Answer) != 3 || en.Source == SourceBlocked {
					t.Errorf("%d: %s from %s: EDE %q answers %v source %q, want the answer as it came", i, tt.name, tt.client, text, m.Answer, en.Source)
				}
				if en.CacheResult != tt.cache {
					t.Errorf("%d: cache %q, want %q", i, en.CacheResult, tt.cache)
				}
			}
			if pool.Calls() != 2 {
				t.Errorf("the pool was asked %d times, want 2 (one per name): the cache holds the answer as it came", pool.Calls())
			}
		})
	}
}

// A DNAME's target, and a chain longer than is decided at once, are
// inspected too; a compressed target (the byte path) is expanded.
func TestCNAMEInspectionLongChainAndDNAME(t *testing.T) {
	t.Parallel()
	e := newBlocking(t, "[blocking]\nblock = [\"||bad.example^\"]\n")
	var long []string
	for i := range chainMax + 3 {
		long = append(long, fmt.Sprintf("c%d.example. 300 IN CNAME c%d.example.", i, i+1))
	}
	long = append(long, fmt.Sprintf("c%d.example. 300 IN CNAME x.bad.example.", chainMax+3))
	for _, kind := range poolKinds {
		for name, records := range map[string][]string{
			"dname": {"example.net. 300 IN DNAME bad.example.", "www.example.net. 300 IN CNAME www.bad.example."},
			"long":  long,
		} {
			t.Run(kind.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				h, rec := newTestHandler(t, HandlerConfig{Pool: kind.wrap(answeringPool(t, records...)), Blocking: e})
				m, _ := exchange(t, h, newQuery("www.example.net.", dns.TypeA), ProtoUDP)
				if en := rec.last(); en.Source != SourceBlocked || en.List != "rule" || len(m.Answer) != 1 {
					t.Errorf("source %q list %q answers %v, want blocked by rule", en.Source, en.List, m.Answer)
				}
			})
		}
	}
}

// cname_inspection = false lets a chain through.
func TestCNAMEInspectionOff(t *testing.T) {
	t.Parallel()
	e := newBlocking(t, "[blocking]\ncname_inspection = false\nblock = [\"||bad.example^\"]\n")
	h, rec := newTestHandler(t, HandlerConfig{Pool: answeringPool(t, "www.example. 300 IN CNAME bad.example.", "bad.example. 300 IN A 192.0.2.1"), Blocking: e})
	m, _ := exchange(t, h, newQuery("www.example.", dns.TypeA), ProtoUDP)
	if en := rec.last(); en.Source != SourcePool || len(m.Answer) != 2 {
		t.Errorf("source %q answers %v, want the answer as it came", en.Source, m.Answer)
	}
}

// A blocked name is answered on the listener's fast path, without an
// allocation of blocking's own: the one allocation is the parsed name's,
// as for a cache hit.
func TestBlockedOnTheFastPath(t *testing.T) {
	e := newBlocking(t, "[blocking]\nblock = [\"||ads.example^\"]\n")
	h, _ := newTestHandler(t, HandlerConfig{Blocking: e})
	raw := mustPack(t, withEDNS(newQuery("www.ads.example.", dns.TypeA), 1232, false))
	req := &server.Request{Raw: raw, Proto: ProtoUDP, Client: testClient, Answer: make([]byte, 0, 4096)}
	allocs := testing.AllocsPerRun(100, func() {
		if _, handled := h.ServeFast(req); !handled {
			t.Fatal("a blocked name was handed on")
		}
	})
	if allocs > 1 {
		t.Errorf("%v allocations per blocked query, want at most 1", allocs)
	}
}

// BenchmarkServeFastBlocked is BenchmarkServeFastHit for a blocked name:
// every query blocked by a custom rule on the listener's fast path.
func BenchmarkServeFastBlocked(b *testing.B) {
	e := newBlocking(b, "[blocking]\nblock = [\"||ads.example^\"]\n")
	h, err := NewHandler(HandlerConfig{Pool: &fakePool{}, Blocking: e, Cache: testCacheConfig(), Hooks: HooksFunc(func(*Entry) {})})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(h.Close)
	raw := mustPack(b, withEDNS(newQuery("www.ads.example.", dns.TypeA), 1232, false))
	req := &server.Request{Raw: raw, Proto: ProtoUDP, Client: testClient, Answer: make([]byte, 0, 4096)}
	b.ReportAllocs()
	for b.Loop() {
		if _, handled := h.ServeFast(req); !handled {
			b.Fatal("not blocked")
		}
	}
}

// millionRules writes a generated list of 1,000,000 rules (blocktest)
// and ||blocked.example^, and returns an Engine with it in force.
func millionRules(b *testing.B) *blocking.Engine {
	b.Helper()
	p := filepath.Join(b.TempDir(), "million.txt")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := blocktest.New(27).WriteList(f, blocktest.Mix{Rules: 1_000_000, Allow: 1000}, 0); err != nil {
		b.Fatal(err)
	}
	if _, err := f.WriteString("||blocked.example^\n"); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	e := newBlocking(b, fmt.Sprintf("[[blocking.lists]]\nname = \"million\"\nsource = %q\n", p))
	if e.Idle() {
		b.Fatal("the list is not in force")
	}
	return e
}

// BenchmarkServeFastRules is the fast path with a 1,000,000-rule list in
// force: a cache hit (step 3 decides the name, step 8 inspects the
// cached answer) and a blocked name. Beside BenchmarkServeFastHit, it is
// what the rules cost a hit.
func BenchmarkServeFastRules(b *testing.B) {
	e := millionRules(b)
	for _, bc := range []struct {
		name, qname string
		clients     int // a directory of this many named clients (spec section 15), the client among them
	}{
		{"hit", "www.example.com.", 0},
		{"blocked", "www.blocked.example.", 0},
		{"hit+names=10000", "www.example.com.", 10000},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pool := answeringPool(b, "www.example.com. 300 IN A 192.0.2.1", "www.example.com. 300 IN A 192.0.2.2")
			cfg := HandlerConfig{Pool: pool, Cache: testCacheConfig(), Hooks: HooksFunc(func(*Entry) {}), Blocking: e}
			if bc.clients > 0 {
				cfg.Clients = namedClients(b, bc.clients)
			}
			h, err := NewHandler(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(h.Close)
			raw := mustPack(b, withEDNS(newQuery(bc.qname, dns.TypeA), 1232, false))
			req := &server.Request{Raw: raw, Proto: ProtoUDP, Client: testClient, Answer: make([]byte, 0, 4096)}
			if _, handled := h.ServeFast(req); !handled {
				h.ServeDNS(context.Background(), &server.Request{Raw: raw, Proto: ProtoUDP, Client: testClient, Pending: req.Pending})
			}
			b.ReportAllocs()
			for b.Loop() {
				req.Pending = nil
				if _, handled := h.ServeFast(req); !handled {
					b.Fatal("not answered on the fast path")
				}
			}
		})
	}
}

// CNAME inspection of a cached answer allocates nothing of its own with
// rules in force, whether the chain is let through or blocked (once the
// scratch has its chain buffer): the one allocation is the parsed name's.
func TestCNAMEInspectionAllocatesNothing(t *testing.T) {
	e := newBlocking(t, "[blocking]\nblock = [\"||bad.example^\"]\n")
	pool := bytePool{answeringPool(t, "www.example. 300 IN CNAME cdn.example.", "cdn.example. 300 IN A 192.0.2.1")}
	bad := bytePool{answeringPool(t, "ok.example. 300 IN CNAME x.bad.example.", "x.bad.example. 300 IN A 192.0.2.1")}
	for name, tc := range map[string]struct {
		pool  Pool
		qname string
	}{"through": {pool, "www.example."}, "blocked": {bad, "ok.example."}} {
		h, rec := newTestHandler(t, HandlerConfig{Pool: tc.pool, Blocking: e, Cache: testCacheConfig()})
		t.Cleanup(h.Close)
		raw := mustPack(t, withEDNS(newQuery(tc.qname, dns.TypeA), 1232, false))
		req := &server.Request{Raw: raw, Proto: ProtoUDP, Client: testClient, Answer: make([]byte, 0, 4096)}
		if _, handled := h.ServeFast(req); !handled {
			h.ServeDNS(context.Background(), &server.Request{Raw: raw, Proto: ProtoUDP, Client: testClient, Pending: req.Pending, Answer: make([]byte, 0, 4096)})
		}
		allocs := testing.AllocsPerRun(100, func() {
			req.Pending = nil
			if _, handled := h.ServeFast(req); !handled {
				t.Fatalf("%s: not a cache hit", name)
			}
		})
		if allocs > 1 {
			t.Errorf("%s: %v allocations per inspected hit, want at most 1", name, allocs)
		}
		if en := rec.last(); (en.Source == SourceBlocked) != (name == "blocked") || en.CacheResult != CacheHit {
			t.Errorf("%s: source %q cache %q", name, en.Source, en.CacheResult)
		}
	}
}

// A query the general parser takes (an EDNS cookie, a name with an
// escaped byte) is blocked like any other: its answer parses, echoes the
// question as the client wrote it and names the list. An EDE that would
// take the answer past the client's UDP size is dropped, the answer kept.
func TestBlockedGeneralPathAndEDESize(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("l", 480)
	e := newBlocking(t, fmt.Sprintf("[blocking]\nblock = [\"||ads.example^\"]\n[[blocking.lists]]\nname = %q\nsource = %q\n",
		long, listFile(t, "||tracker.example^")))
	h, rec := newTestHandler(t, HandlerConfig{Blocking: e})

	q := withEDNS(newQuery(`a\.b.ads.example.`, dns.TypeA), 1232, false)
	q.IsEdns0().Option = append(q.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
	m, _ := exchange(t, h, q, ProtoUDP)
	checkEcho(t, q, m)
	if text, ok := blockedEDE(m); !ok || text != "blocked by rule" || len(m.Answer) != 1 || rec.last().Source != SourceBlocked {
		t.Errorf("general path: EDE %q answers %v source %q, want blocked by rule", text, m.Answer, rec.last().Source)
	}

	for _, size := range []uint16{512, 1232} {
		q := withEDNS(newQuery("x.tracker.example.", dns.TypeA), size, false)
		m, raw := exchange(t, h, q, ProtoUDP)
		text, ok := blockedEDE(m)
		if fits := size == 1232; ok != fits || ok && text != "blocked by "+long || len(m.Answer) != 1 || m.Truncated {
			t.Errorf("UDP size %d: EDE %v (%d bytes of text), answers %v, TC %v; want the EDE only if it fits", size, ok, len(text), m.Answer, m.Truncated)
		}
		if len(raw) > int(size) {
			t.Errorf("UDP size %d: a %d-byte answer", size, len(raw))
		}
		if rec.last().List != long {
			t.Errorf("UDP size %d: the entry's list is not the list's name", size)
		}
	}
}

// A group that names a client by its name (spec sections 11 and 15)
// blocks for the address the client names give that name, and follows
// the name: another address is not in the group. The tablet at
// 127.0.0.2 is in the kids' group by its static name; 127.0.0.1 is not.
// Fails before the client names were passed to the decision (nil names:
// the tablet was in no group but default).
func TestBlockedByClientName(t *testing.T) {
	t.Parallel()
	kids := listFile(t, "||games.example^")
	e := newBlocking(t, fmt.Sprintf(`
[[blocking.lists]]
name = "kids"
source = %q
[[blocking.groups]]
name = "kids"
clients = ["tablet"]
lists = ["kids"]
`, kids))
	tablet := netip.MustParseAddrPort("127.0.0.2:5000")
	d := clients.New(clients.Config{Static: []clients.Static{{Name: "tablet", Addrs: []netip.Addr{tablet.Addr()}}}}, nil, nil)
	t.Cleanup(d.Close)
	pool := answeringPool(t, "games.example. 300 IN A 192.0.2.1")
	h, rec := newTestHandler(t, HandlerConfig{Pool: pool, Blocking: e, Clients: d})
	for _, tt := range []struct {
		client  netip.AddrPort
		blocked bool
	}{
		{tablet, true},
		{netip.MustParseAddrPort("127.0.0.1:5000"), false},
	} {
		m := exchangeFrom(t, h, tt.client, withEDNS(newQuery("games.example.", dns.TypeA), 1232, false), ProtoUDP)
		text, ok := blockedEDE(m)
		if en := rec.last(); ok != tt.blocked || (tt.blocked && (text != "blocked by kids" || en.List != "kids")) {
			t.Errorf("from %s (client name %q): EDE %q (%v), source %q; want blocked %v", tt.client, en.ClientName, text, ok, en.Source, tt.blocked)
		}
	}
}

// BenchmarkHits1M is nxdnsbench's hits and blocked rows (issue 27) on the
// listener's fast path, without the sockets: hitNames names under
// bench.example asked over and over, each a cache hit, side by side
// without lists ("none") and with the 1,000,000-rule list of
// millionRules in force ("1M"); and "blocked", as many names under
// blocked.example, which the list blocks, every query blocked. In
// one invocation the three run one after the other, so that their ratios
// are taken under the same load (-count N repeats each N times in a row:
// run the test binary N times instead). Each reports the CPU time of its
// thread (cpu-ns/op), which the scheduler's waits on a shared machine do
// not inflate. The answers come as bytes (bytePool), as the transports
// hand them over.
func BenchmarkHits1M(b *testing.B) {
	const hitNames = 1000
	e := millionRules(b)
	pool := bytePool{&fakePool{OnExchange: func(_ context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result {
		m := new(dns.Msg)
		m.SetReply(q)
		m.RecursionAvailable = true
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 3600}, A: net.IPv4(192, 0, 2, 1)}}
		if o := q.IsEdns0(); o != nil {
			m.SetEdns0(1232, o.Do())
		}
		trail = append(trail, actors.Attempt{Upstream: "primary", Outcome: actors.OutcomeAnswer})
		return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "primary", Attempts: trail}
	}}}
	for _, bc := range []struct {
		name  string
		rules *blocking.Engine
		zone  string
	}{
		{"none", nil, "bench.example."},
		{"1M", e, "bench.example."},
		{"blocked", e, "blocked.example."},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h, err := NewHandler(HandlerConfig{Pool: pool, Cache: testCacheConfig(), Hooks: HooksFunc(func(*Entry) {}), Blocking: bc.rules})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(h.Close)
			reqs := make([]server.Request, hitNames)
			answer := make([]byte, 0, 4096)
			for i := range reqs {
				raw := mustPack(b, withEDNS(newQuery(fmt.Sprintf("h%d.%s", i, bc.zone), dns.TypeA), 1232, false))
				reqs[i] = server.Request{Raw: raw, Proto: ProtoUDP, Client: testClient, Answer: answer}
				if _, handled := h.ServeFast(&reqs[i]); !handled {
					h.ServeDNS(context.Background(), &server.Request{Raw: raw, Proto: ProtoUDP, Client: testClient, Pending: reqs[i].Pending})
				}
			}
			b.ReportAllocs()
			cpu := cputimetest.Start(b)
			i := 0
			for b.Loop() {
				r := &reqs[i%hitNames]
				r.Pending = nil
				if out, handled := h.ServeFast(r); !handled || len(out) == 0 {
					b.Fatal("not answered on the fast path")
				}
				i++
			}
			cpu.Report(b, i)
		})
	}
}

// hasChain, inspect's early test, sees a CNAME or DNAME wherever it is in
// the answer section, in a message or in its bytes, and in bytes cut
// short only what walkChain would read: an answer it says holds none is
// one CNAME inspection has nothing to decide on. Mutation check: looking
// at the first answer record only fails the "after an A" cases.
func TestHasChain(t *testing.T) {
	t.Parallel()
	answer := func(records ...string) *dns.Msg {
		m := new(dns.Msg)
		m.SetReply(newQuery("www.example.", dns.TypeA))
		m.Answer = mustRRs(t, records...)
		m.Compress = true
		return m
	}
	a := "www.example. 300 IN A 192.0.2.1"
	for _, tc := range []struct {
		name string
		m    *dns.Msg
		want bool
	}{
		{"no answer", answer(), false},
		{"A only", answer(a, "www.example. 300 IN A 192.0.2.2"), false},
		{"CNAME first", answer("www.example. 300 IN CNAME cdn.example.", "cdn.example. 300 IN A 192.0.2.1"), true},
		{"CNAME after an A", answer(a, "www.example. 300 IN CNAME cdn.example."), true},
		{"DNAME after an A", answer(a, "example. 300 IN DNAME example.net."), true},
	} {
		if got := hasChain(tc.m, nil); got != tc.want {
			t.Errorf("%s, message: %v, want %v", tc.name, got, tc.want)
		}
		raw := mustPack(t, tc.m)
		if got := hasChain(nil, raw); got != tc.want {
			t.Errorf("%s, bytes: %v, want %v", tc.name, got, tc.want)
		}
	}
	raw := mustPack(t, answer(a, "www.example. 300 IN CNAME cdn.example."))
	if hasChain(nil, raw[:len(raw)-3]) {
		t.Error("bytes cut short in the CNAME's RDATA: a chain walkChain would not read")
	}
	if !hasChain(nil, mustPack(t, answer("www.example. 300 IN CNAME cdn.example.", a))[:len(raw)-3]) {
		t.Error("a CNAME before the cut: walkChain reads it")
	}
	if hasChain(nil, raw[:5]) {
		t.Error("a header cut short")
	}
}

// A cache hit whose name no rule names is let through without a decision
// once its entry carries the note (cache.Hit.NamesNothing) for the rules
// in force, and for them alone: a custom rule added after the note
// blocks the name at its next hit, a pause lets it through, the end of
// the pause blocks it again. A name that some group's list names gets no
// note, so that the group's client is still blocked after another
// client's hits. Mutation checks: ignoring the serial in NamesNothing
// fails the custom-rule step; noting every decision that blocks nothing
// fails the group step.
func TestBlockingNoteOnCacheEntry(t *testing.T) {
	t.Parallel()
	kids := listFile(t, "||games.example^")
	m := newBlockingManager(t, fmt.Sprintf(`[blocking]
block = ["||ads.example^"]
state_dir = %q
[[blocking.lists]]
name = "kids"
source = %q
[[blocking.groups]]
name = "kids"
clients = ["127.0.0.2"]
lists = ["kids"]
`, t.TempDir(), kids))
	e := m.Engine()
	pool := answeringPool(t, "www.example. 300 IN A 192.0.2.1")
	h, rec := newTestHandler(t, HandlerConfig{Pool: pool, Blocking: e, Cache: testCacheConfig()})
	t.Cleanup(h.Close)
	one, two := netip.MustParseAddrPort("127.0.0.1:5000"), netip.MustParseAddrPort("127.0.0.2:5000")
	ask := func(client netip.AddrPort, name string) Entry {
		t.Helper()
		exchangeFrom(t, h, client, withEDNS(newQuery(name, dns.TypeA), 1232, false), ProtoUDP)
		return rec.last()
	}
	noted := func(name string) bool {
		t.Helper()
		hit, st := h.cache.Cache.Get(cache.Key{Name: name, Type: dns.TypeA, Class: dns.ClassINET}, time.Now())
		if st != cache.Fresh {
			t.Fatalf("%s: cache state %v, want fresh", name, st)
		}
		return hit.NamesNothing(e.Rules().Serial())
	}

	for i, want := range []string{SourcePool, SourceCache, SourceCache} {
		if en := ask(one, "www.example."); en.Source != want {
			t.Fatalf("www.example. query %d: source %q, want %q", i, en.Source, want)
		}
	}
	if !noted("www.example.") {
		t.Fatal("a hit whose name no rule names left no note on its entry")
	}
	if _, err := m.AddRule(blocking.APIRule{Kind: "block", Rule: "www.example"}); err != nil {
		t.Fatal(err)
	}
	if en := ask(one, "www.example."); en.Source != SourceBlocked || en.List != config.ReservedListName {
		t.Fatalf("after the custom rule: source %q list %q, want blocked by %q", en.Source, en.List, config.ReservedListName)
	}
	m.Pause(0)
	if en := ask(one, "www.example."); en.Source != SourceCache {
		t.Fatalf("paused: source %q, want the cache", en.Source)
	}
	m.Resume()
	if en := ask(one, "www.example."); en.Source != SourceBlocked {
		t.Fatalf("resumed: source %q, want blocked", en.Source)
	}

	for i, want := range []string{SourcePool, SourceCache, SourceCache} {
		if en := ask(one, "games.example."); en.Source != want {
			t.Fatalf("games.example. query %d from %s: source %q, want %q", i, one, en.Source, want)
		}
	}
	if noted("games.example.") {
		t.Error("a name the kids list names was noted as named by nothing")
	}
	if en := ask(two, "games.example."); en.Source != SourceBlocked || en.List != "kids" {
		t.Errorf("games.example. from %s after %s's hits: source %q list %q, want blocked by kids", two, one, en.Source, en.List)
	}
}
