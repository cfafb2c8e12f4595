package daemon

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/rebind"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// privateAnswers are the names a fake upstream answers with a private
// address, by first label: every range spec section 15 strips.
var privateAnswers = map[string]string{
	"rfc1918":  "A 192.168.1.1",
	"ten":      "A 10.0.0.1",
	"loopback": "A 127.0.0.1",
	"v6loop":   "AAAA ::1",
	"ula":      "AAAA fd00::1",
	"cgnat":    "A 100.64.0.1",
}

// addressHandler answers every A and AAAA query from its first label's
// entry in answers ("A 192.168.1.1"), or with a public address.
func addressHandler(tb testing.TB, answers map[string]string) wiretest.Handler {
	tb.Helper()
	return func(w *wiretest.Writer, q *dns.Msg) {
		name := q.Question[0].Name
		label, _, _ := strings.Cut(strings.ToLower(name), ".")
		rr := "A 93.184.215.14"
		if a, ok := answers[label]; ok {
			rr = a
		}
		r := new(dns.Msg).SetReply(q)
		if x, err := dns.NewRR(name + " 300 IN " + rr); err == nil {
			r.Answer = []dns.RR{x}
		}
		if o := q.IsEdns0(); o != nil {
			r.SetEdns0(1232, o.Do())
		}
		w.WriteMsg(r)
	}
}

func askEDNS(tb testing.TB, addr, name string, qtype uint16) *dns.Msg {
	tb.Helper()
	q := wiretest.Query(name, qtype)
	q.SetEdns0(1232, false)
	return ask(tb, "udp", addr, q)
}

func hasRebindEDE(m *dns.Msg) bool {
	if o := m.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_EDE); ok && e.InfoCode == rebind.EDECode && e.ExtraText == rebind.EDEText {
				return true
			}
		}
	}
	return false
}

// Issue 30: a public name answering 192.168.1.1, 10.0.0.1, 127.0.0.1, ::1,
// fd00::1 and 100.64.0.1 is stripped (NODATA, EDE 15, "rebind":true, the
// source pool, counted), a name under rebind_allow is not, a forward
// zone's private answer is not; over UDP through a whole daemon.
func TestRebindingProtection(t *testing.T) {
	answers := map[string]string{"nas": "A 192.168.1.5"}
	for k, v := range privateAnswers {
		answers[k] = v
	}
	up := wiretest.NewServer(t, addressHandler(t, answers))
	corp := wiretest.NewServer(t, addressHandler(t, answers))
	o := startObserved(t, upstreamTOML(up.Addr)+fmt.Sprintf(`
[server]
rebind_allow = ["plex.direct."]
[[forward_zones]]
zone = "corp.example."
resolver = %q
`, corp.Addr), false, options{})

	for label, rr := range privateAnswers {
		qtype := dns.TypeA
		if strings.HasPrefix(rr, "AAAA") {
			qtype = dns.TypeAAAA
		}
		r := askEDNS(t, o.udp, label+".attacker.example.", qtype)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 || !hasRebindEDE(r) {
			t.Errorf("%s (%s): rcode %s, answer %v, EDE 15 %v; want NODATA with EDE 15", label, rr, dns.RcodeToString[r.Rcode], r.Answer, hasRebindEDE(r))
		}
	}
	for _, name := range []string{"nas.x.plex.direct.", "nas.corp.example.", "public.example."} {
		r := askEDNS(t, o.udp, name, dns.TypeA)
		if len(r.Answer) != 1 || hasRebindEDE(r) {
			t.Errorf("%s: answer %v, EDE 15 %v; want its address untouched", name, r.Answer, hasRebindEDE(r))
		}
	}

	lines := o.logLines(t)
	if len(lines) != len(privateAnswers)+3 {
		t.Fatalf("%d log lines, want %d", len(lines), len(privateAnswers)+3)
	}
	for i, l := range lines {
		stripped := i < len(privateAnswers)
		wantSource := "pool"
		if strings.HasSuffix(l.qname(), "corp.example.") {
			wantSource = "forward_zone"
		}
		if l.Rebind != stripped || l.source() != wantSource {
			t.Errorf("line %d (%s): rebind %v source %s; want %v, %s", i, l.qname(), l.Rebind, l.source(), stripped, wantSource)
		}
	}
	// /api/queries says so too, as openapi.yaml describes it.
	if _, queries := o.recentQueries(t, ""); len(queries) != len(lines) || !strings.Contains(string(queries[len(queries)-1]), `"rebind":true`) {
		t.Errorf("/api/queries: the oldest query %s, want it with \"rebind\":true", queries[len(queries)-1])
	}
	if v := metricValue(t, scrapeDaemon(t, o.d), "nxdns_rebind_stripped_total"); v != float64(len(privateAnswers)) {
		t.Errorf("nxdns_rebind_stripped_total = %v, want %d", v, len(privateAnswers))
	}
}

// A cached private answer is stripped on its way out, for every client,
// hit after hit; the cache keeps the upstream's answer as it came, which
// a reload turning protection off then serves whole.
func TestRebindingProtectionCached(t *testing.T) {
	up := wiretest.NewServer(t, addressHandler(t, privateAnswers))
	src := upstreamTOML(up.Addr) + "\n[cache]\nenabled = true\n"
	o := startObserved(t, src, false, options{})
	for i := range 3 {
		r := askEDNS(t, o.udp, "rfc1918.attacker.example.", dns.TypeA)
		if len(r.Answer) != 0 || !hasRebindEDE(r) {
			t.Fatalf("query %d: answer %v, EDE 15 %v; want stripped", i, r.Answer, hasRebindEDE(r))
		}
	}
	lines := o.logLines(t)
	for i, l := range lines {
		want := "pool"
		if i > 0 {
			want = "cache"
		}
		if l.source() != want || !l.Rebind {
			t.Errorf("line %d: source %s rebind %v, want %s, true", i, l.source(), l.Rebind, want)
		}
	}

	// The admin server and the query log need a restart: the reload
	// keeps them as they run.
	off := "[server]\nlisten = [\"127.0.0.1:0\"]\nrebind_protection = false\n" + src
	if err := o.d.Reload(func() (*config.Config, error) { return config.Parse([]byte(off)) }); err != nil {
		t.Fatal(err)
	}
	r := askEDNS(t, o.udp, "rfc1918.attacker.example.", dns.TypeA)
	if len(r.Answer) != 1 || hasRebindEDE(r) {
		t.Errorf("protection off: answer %v, EDE 15 %v; want the cached private address", r.Answer, hasRebindEDE(r))
	}
	if l := o.logLines(t); l[len(l)-1].source() != "cache" {
		t.Errorf("protection off: source %s, want cache", l[len(l)-1].source())
	}
}

// ptrCounter answers PTR queries with name and counts them.
type ptrCounter struct {
	ptrs atomic.Int64
	name string
}

func (p *ptrCounter) handle(w *wiretest.Writer, q *dns.Msg) {
	r := new(dns.Msg).SetReply(q)
	if q.Question[0].Qtype == dns.TypePTR {
		p.ptrs.Add(1)
		r.Answer = []dns.RR{&dns.PTR{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: 300}, Ptr: p.name}}
	}
	w.WriteMsg(r)
}

// Issue 30: a PTR query for a private address with no forward zone is
// answered NXDOMAIN, with the zone's SOA, source special, without
// reaching the upstream (127.0.0.1 is no router); a public address's goes
// to it. Mutation check: taking emptyZone out of the fast steps sends the
// private ones to the upstream.
func TestPrivateReverseNameNeverReachesUpstream(t *testing.T) {
	up := &ptrCounter{name: "public.example."}
	srv := wiretest.NewServer(t, up.handle)
	o := startObserved(t, upstreamTOML(srv.Addr)+"\n[cache]\nenabled = true\n", false, options{})
	for _, tt := range []struct{ name, zone string }{
		{"50.1.168.192.in-addr.arpa.", "168.192.in-addr.arpa."},
		{"1.0.0.10.in-addr.arpa.", "10.in-addr.arpa."},
		{"1.0.64.100.in-addr.arpa.", "64.100.in-addr.arpa."},
		{"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", "d.f.ip6.arpa."},
	} {
		r := askEDNS(t, o.udp, tt.name, dns.TypePTR)
		if r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 || r.Ns[0].Header().Name != tt.zone || r.Ns[0].Header().Rrtype != dns.TypeSOA {
			t.Errorf("%s: rcode %s, authority %v; want NXDOMAIN with %s's SOA", tt.name, dns.RcodeToString[r.Rcode], r.Ns, tt.zone)
		}
	}
	if n := up.ptrs.Load(); n != 0 {
		t.Errorf("the upstream got %d PTR queries, want none", n)
	}
	for _, l := range o.logLines(t) {
		if l.source() != "special" {
			t.Errorf("%s: source %s, want special", l.qname(), l.source())
		}
	}
	if r := askEDNS(t, o.udp, "8.8.8.8.in-addr.arpa.", dns.TypePTR); len(r.Answer) != 1 || up.ptrs.Load() != 1 {
		t.Errorf("a public address: answer %v, upstream asked %d times; want the upstream's, once", r.Answer, up.ptrs.Load())
	}
}

// changes returns an OnChange for the client directory and the channel it
// ticks, never blocking the directory.
func changes() (func(), <-chan struct{}) {
	ch := make(chan struct{}, 1)
	return func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}, ch
}

// waitName waits, on the directory's changes, until addr has the name
// want, at most a few seconds.
func waitName(tb testing.TB, d *Daemon, changed <-chan struct{}, addr netip.Addr, want string) {
	tb.Helper()
	deadline := time.After(5 * time.Second)
	for d.clients.Name(addr) != want {
		select {
		case <-changed:
		case <-deadline:
			tb.Fatalf("%s is named %q, want %q", addr, d.clients.Name(addr), want)
		}
	}
}

// Issue 30: a leases file rewritten while the daemon runs renames the
// client in the next log lines, and in /api/queries.
func TestLeasesFileRenamesClient(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	leases := filepath.Join(t.TempDir(), "dnsmasq.leases")
	write := func(name string) {
		t.Helper()
		// A new file renamed over the old one, as dnsmasq writes it.
		tmp := leases + ".new"
		if err := os.WriteFile(tmp, []byte("0 aa:bb:cc:dd:ee:ff 127.0.0.1 "+name+" *\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, leases); err != nil {
			t.Fatal(err)
		}
	}
	write("laptop")
	onChange, changed := changes()
	o := startObserved(t, upstreamTOML(up.Addr)+fmt.Sprintf("\n[clients]\nleases_files = [%q]\n", leases), false,
		options{clientsPoll: 10 * time.Millisecond, onClientsChange: onChange})
	client := netip.MustParseAddr("127.0.0.1")

	ask(t, "udp", o.udp, wiretest.Query("one.example.", dns.TypeA))
	write("desk-pc-2")
	waitName(t, o.d, changed, client, "desk-pc-2")
	ask(t, "udp", o.udp, wiretest.Query("two.example.", dns.TypeA))

	lines := o.logLines(t)
	if len(lines) != 2 || lines[0].ClientName != "laptop" || lines[1].ClientName != "desk-pc-2" {
		t.Fatalf("log lines %+v, want client_name laptop then desk-pc-2", lines)
	}
	_, queries := o.recentQueries(t, "")
	var newest struct {
		ClientName string `json:"client_name"`
	}
	if len(queries) != 2 || json.Unmarshal(queries[0], &newest) != nil || newest.ClientName != "desk-pc-2" {
		t.Errorf("/api/queries %s, want the newest with client_name desk-pc-2", queries)
	}
}

// Issue 30: a client with a private address no file names is named by
// its PTR record, asked of the forward zone that covers its reverse name
// (the current generation's), never of the pool.
func TestPTRNameThroughForwardZone(t *testing.T) {
	pool := &ptrCounter{name: "wrong.example."}
	zone := &ptrCounter{name: "tablet.lan."}
	up := wiretest.NewServer(t, pool.handle)
	router := wiretest.NewServer(t, zone.handle)
	onChange, changed := changes()
	s := runDaemon(t, reloadSrc(upstreamTOML(up.Addr)+fmt.Sprintf(`
[[forward_zones]]
zone = "168.192.in-addr.arpa."
resolver = %q
`, router.Addr)), options{onClientsChange: onChange})
	tablet := netip.MustParseAddr("192.168.1.50")
	if n := s.d.clients.Name(tablet); n != "" {
		t.Fatalf("named %q before any lookup", n)
	}
	waitName(t, s.d, changed, tablet, "tablet.lan")
	if zone.ptrs.Load() != 1 || pool.ptrs.Load() != 0 {
		t.Errorf("PTR queries: zone %d, pool %d; want 1 and 0", zone.ptrs.Load(), pool.ptrs.Load())
	}
}

// rawExchange sends the packed query raw over UDP to addr and returns the
// answer's bytes as they came.
func rawExchange(tb testing.TB, addr string, raw []byte) []byte {
	tb.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(3 * time.Second)); err != nil {
		tb.Fatal(err)
	}
	if _, err := c.Write(raw); err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		tb.Fatal(err)
	}
	return buf[:n]
}

// Acceptance of issue 30: answers that carry no private address are byte
// for byte the same with protection on and off, through a whole daemon.
func TestPublicAnswersSameWithProtectionOnAndOff(t *testing.T) {
	records := map[string][]string{
		"a":     {"a.example. 300 IN A 93.184.215.14", "a.example. 300 IN A 198.51.100.7"},
		"aaaa":  {"aaaa.example. 300 IN AAAA 2606:2800:21f:cb07:6820:80da:af6b:8b2c"},
		"cname": {"cname.example. 300 IN CNAME cdn.example.net.", "cdn.example.net. 60 IN A 23.45.67.89"},
		"mx":    {"mx.example. 300 IN MX 10 mail.example.", "mail.example. 300 IN A 198.51.100.25"},
		"https": {`https.example. 300 IN HTTPS 1 . alpn="h3,h2" ipv4hint="104.16.132.229" ipv6hint="2606:4700::6810:84e5"`},
		"txt":   {`txt.example. 300 IN TXT "v=spf1 include:_spf.example.net ~all"`},
	}
	up := wiretest.NewServer(t, func(w *wiretest.Writer, q *dns.Msg) {
		label, _, _ := strings.Cut(q.Question[0].Name, ".")
		r := new(dns.Msg).SetReply(q)
		for _, s := range records[label] {
			rr, err := dns.NewRR(s)
			if err != nil {
				panic(err)
			}
			if rr.Header().Rrtype == dns.TypeA && label == "mx" {
				r.Extra = append(r.Extra, rr)
				continue
			}
			r.Answer = append(r.Answer, rr)
		}
		if o := q.IsEdns0(); o != nil {
			r.SetEdns0(1232, o.Do())
		}
		w.WriteMsg(r)
	})
	on := startDaemon(t, upstreamTOML(up.Addr))
	off := startDaemon(t, upstreamTOML(up.Addr)+"\n[server]\nrebind_protection = false\n")
	types := map[string]uint16{"a": dns.TypeA, "aaaa": dns.TypeAAAA, "cname": dns.TypeA, "mx": dns.TypeMX, "https": dns.TypeHTTPS, "txt": dns.TypeTXT}
	for label, qtype := range types {
		for _, edns := range []bool{false, true} {
			q := wiretest.Query(label+".example.", qtype)
			q.Id = 0x1234
			if edns {
				q.SetEdns0(1232, true)
			}
			raw, err := q.Pack()
			if err != nil {
				t.Fatal(err)
			}
			a, b := rawExchange(t, on.udp, raw), rawExchange(t, off.udp, raw)
			if string(a) != string(b) {
				t.Errorf("%s (EDNS %v): protection on %x\noff %x", label, edns, a, b)
			}
			var m dns.Msg
			if err := m.Unpack(a); err != nil || len(m.Answer) == 0 {
				t.Errorf("%s (EDNS %v): %v, %d answers; want the upstream's", label, edns, err, len(m.Answer))
			}
		}
	}
}

// A reload gives the directory the new [clients]: a static name changed
// names the client's next queries. Mutation check: dropping the Reload
// call in reloadLocked keeps the old name.
func TestReloadRenamesClient(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer())
	static := func(name string) string {
		return upstreamTOML(up.Addr) + fmt.Sprintf("\n[[clients.static]]\nname = %q\naddresses = [\"127.0.0.1\"]\n", name)
	}
	o := startObserved(t, static("before"), false, options{})
	ask(t, "udp", o.udp, wiretest.Query("one.example.", dns.TypeA))
	after := "[server]\nlisten = [\"127.0.0.1:0\"]\n" + static("after")
	if err := o.d.Reload(func() (*config.Config, error) { return config.Parse([]byte(withoutCacheOrHistory(after))) }); err != nil {
		t.Fatal(err)
	}
	ask(t, "udp", o.udp, wiretest.Query("two.example.", dns.TypeA))
	lines := o.logLines(t)
	if len(lines) != 2 || lines[0].ClientName != "before" || lines[1].ClientName != "after" {
		t.Errorf("log lines %+v, want client_name before, then after", lines)
	}
}
