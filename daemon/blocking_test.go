package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/blocking"
	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// askFrom is ask from the local address local (127.0.0.2: another client
// on loopback).
func askFrom(tb testing.TB, proto, addr, local string, m *dns.Msg) *dns.Msg {
	tb.Helper()
	var la net.Addr = &net.UDPAddr{IP: net.ParseIP(local)}
	if proto == "tcp" {
		la = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c := &dns.Client{Net: proto, Timeout: 3 * time.Second, UDPSize: 65535, Dialer: &net.Dialer{LocalAddr: la, Timeout: 3 * time.Second}}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		tb.Fatalf("%s query %s from %s: %v", proto, m.Question[0].Name, local, err)
	}
	return r
}

// edeBlocked returns the EXTRA-TEXT of m's EDE 15 (Blocked), or "".
func edeBlocked(m *dns.Msg) string {
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok && e.InfoCode == dns.ExtendedErrorCodeBlocked {
				return e.ExtraText
			}
		}
	}
	return ""
}

// listServer serves a block list over HTTP on loopback until fail is set,
// then answers 500.
type listServer struct {
	*httptest.Server
	fail atomic.Bool
}

func newListServer(tb testing.TB, body string) *listServer {
	tb.Helper()
	ls := &listServer{}
	ls.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if ls.fail.Load() {
			http.Error(w, "down for maintenance", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	tb.Cleanup(ls.Close)
	return ls
}

// blockingUpstream answers lists.test. with 127.0.0.1 (the list host, as
// the pool resolves it), www.example. with a CNAME chain to a tracker,
// and every other name with an A record; it counts the queries for
// www.example.
func blockingUpstream(tb testing.TB, www *atomic.Int64) *wiretest.Server {
	return wiretest.NewServer(tb, func(w *wiretest.Writer, q *dns.Msg) {
		qn := q.Question[0]
		r := new(dns.Msg).SetReply(q)
		switch strings.ToLower(qn.Name) {
		case "lists.test.":
			if qn.Qtype == dns.TypeA {
				r.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: qn.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(127, 0, 0, 1)}}
			}
		case "www.example.":
			www.Add(1)
			r.Answer = []dns.RR{
				&dns.CNAME{Hdr: dns.RR_Header{Name: qn.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 300}, Target: "edge.tracker.example."},
				wiretest.A("edge.tracker.example.", 0),
			}
		default:
			r.Answer = []dns.RR{wiretest.A(qn.Name, 0)}
		}
		w.WriteMsg(r)
	})
}

// postJSON posts body to the admin server's path and decodes the answer
// into out (nil: not decoded); it returns the status code.
func (o *observed) postJSON(tb testing.TB, path, body string, out any) int {
	tb.Helper()
	resp, err := http.Post(o.admin+path, "application/json", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
	}
	return resp.StatusCode
}

func (o *observed) getJSON(tb testing.TB, path string, out any) {
	tb.Helper()
	code, body := o.get(tb, path)
	if code != http.StatusOK {
		tb.Fatalf("%s: %d %s", path, code, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		tb.Fatalf("%s: %v: %s", path, err, body)
	}
}

// The whole path, over real sockets: a list fetched over HTTP from a host
// the upstream pool resolves, blocking the kids' group at 127.0.0.2 and
// not 127.0.0.1, over UDP and TCP with EDE 15 naming the list; the query
// log says so; a cached answer whose CNAME names a blocked name is
// blocked for one client and not the other; the check, pause and resume
// of the admin API; the list's server failing (500) leaves its rules in
// force and the list stale; a SIGHUP reload keeps an unchanged list's
// rules while the new answer settings apply.
func TestBlockingEndToEnd(t *testing.T) {
	var www atomic.Int64
	up := blockingUpstream(t, &www)
	lists := newListServer(t, "# test list\n0.0.0.0 ads.example\n||tracker.example^\n")
	source := strings.Replace(lists.URL, "127.0.0.1", "lists.test", 1) + "/hosts.txt"
	logPath := filepath.Join(t.TempDir(), "query.log")
	src := func(ttl int) string {
		return fmt.Sprintf(`[server]
listen = ["127.0.0.1:0"]
[admin]
listen = "127.0.0.1:0"
[query_log]
path = %q
[cache]
enabled = true
[blocking]
answer_ttl_s = %d
[[blocking.lists]]
name = "ads"
source = %q
[[blocking.groups]]
name = "kids"
clients = ["127.0.0.2"]
lists = ["ads"]
`, logPath, ttl, source) + upstreamTOML(up.Addr)
	}
	o := &observed{started: runDaemon(t, src(10), options{}), logPath: logPath}
	o.admin = "http://" + o.d.AdminAddr().String()

	// Every series from start-up (the list may be in already).
	fs := o.scrape(t)
	if v := metricValue(t, fs, "nxdns_blocked_total", "list", "ads"); v != 0 {
		t.Errorf("nxdns_blocked_total{list=ads} = %v at start, want 0", v)
	}
	metricValue(t, fs, "nxdns_blocked_total", "list", "rule")
	metricValue(t, fs, "nxdns_blocking_rules", "list", "ads")
	metricValue(t, fs, "nxdns_blocking_list_fetches_total", "list", "ads", "result", "failed")
	metricValue(t, fs, "nxdns_blocking_list_age_seconds", "list", "ads")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := o.d.blocking.Refresh(ctx, "ads"); err != nil {
		t.Fatal(err)
	}
	var ls struct{ Lists []blocking.ListStatus }
	o.getJSON(t, "/api/lists", &ls)
	if len(ls.Lists) != 1 || ls.Lists[0].State != blocking.StateOK || ls.Lists[0].Rules != 2 {
		t.Fatalf("/api/lists: %+v, want ads ok with 2 rules (fetched through a host the pool resolved)", ls.Lists)
	}

	blockedFor := func(proto, local, name string, ttl uint32) {
		t.Helper()
		r := askFrom(t, proto, o.addr(proto), local, withEDNS(wiretest.Query(name, dns.TypeA)))
		if got := edeBlocked(r); got != "blocked by ads" || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "0.0.0.0" || r.Answer[0].Header().Ttl != ttl {
			t.Errorf("%s %s from %s: EDE %q answers %v, want 0.0.0.0 TTL %d blocked by ads", proto, name, local, got, r.Answer, ttl)
		}
	}
	notBlockedFor := func(proto, local, name string) *dns.Msg {
		t.Helper()
		r := askFrom(t, proto, o.addr(proto), local, withEDNS(wiretest.Query(name, dns.TypeA)))
		if got := edeBlocked(r); got != "" || len(r.Answer) == 0 || r.Answer[len(r.Answer)-1].(*dns.A).A.String() != "192.0.2.1" {
			t.Errorf("%s %s from %s: EDE %q answers %v, want the upstream's answer", proto, name, local, got, r.Answer)
		}
		return r
	}
	for _, proto := range []string{"udp", "tcp"} {
		blockedFor(proto, "127.0.0.2", "ads.example.", 10)
		blockedFor(proto, "127.0.0.2", "x.tracker.example.", 10)
		notBlockedFor(proto, "127.0.0.1", "ads.example.")
	}

	// CNAME inspection of a cached answer: fetched for 127.0.0.1, then
	// served from the cache, blocked for 127.0.0.2 only.
	if r := notBlockedFor("udp", "127.0.0.1", "www.example."); len(r.Answer) != 2 {
		t.Errorf("www.example. for 127.0.0.1: %v, want the chain", r.Answer)
	}
	blockedFor("udp", "127.0.0.2", "www.example.", 10)
	notBlockedFor("tcp", "127.0.0.1", "www.example.")
	if n := www.Load(); n != 1 {
		t.Errorf("the upstream was asked %d times for www.example., want 1: the cache serves both clients", n)
	}

	// The query log.
	var blockedLines int
	for _, l := range o.logLines(t) {
		if l.source() == "blocked" {
			blockedLines++
			if deref(l.List) != "ads" || !strings.HasPrefix(deref(l.Client), "127.0.0.2:") {
				t.Errorf("blocked line %s from %s: list %s", l.qname(), deref(l.Client), deref(l.List))
			}
		} else if l.List != nil {
			t.Errorf("%s line %s has a list field", l.source(), l.qname())
		}
	}
	if blockedLines != 5 {
		t.Errorf("%d blocked lines in the query log, want 5", blockedLines)
	}
	if v := metricValue(t, o.scrape(t), "nxdns_blocked_total", "list", "ads"); v != 5 {
		t.Errorf("nxdns_blocked_total{list=ads} = %v, want 5", v)
	}

	// The admin API, on the admin listener.
	var check blocking.CheckResult
	o.getJSON(t, "/api/blocking/check?name=www.ads.example&client=127.0.0.2", &check)
	if check.Blocked || check.Groups[0] != "kids" {
		t.Errorf("check www.ads.example: %+v, want not blocked (a hosts line is exact), group kids", check)
	}
	o.getJSON(t, "/api/blocking/check?name=ads.example&client=127.0.0.2", &check)
	if !check.Blocked || deref(check.List) != "ads" || deref(check.Rule) != "ads.example" {
		t.Errorf("check ads.example: %+v, want blocked by ads, rule ads.example", check)
	}
	var pause blocking.PauseStatus
	if code := o.postJSON(t, "/api/blocking/pause", `{}`, &pause); code != http.StatusOK || !pause.Paused {
		t.Fatalf("pause: %d %+v", code, pause)
	}
	notBlockedFor("udp", "127.0.0.2", "ads.example.")
	if code := o.postJSON(t, "/api/blocking/resume", ``, &pause); code != http.StatusOK || pause.Paused {
		t.Fatalf("resume: %d %+v", code, pause)
	}
	blockedFor("udp", "127.0.0.2", "ads.example.", 10)

	// The list's server fails: the rules in force stay, the list is stale.
	lists.fail.Store(true)
	if err := o.d.blocking.Refresh(ctx, "ads"); err != nil {
		t.Fatal(err)
	}
	o.getJSON(t, "/api/lists", &ls)
	if st := ls.Lists[0]; st.State != blocking.StateStale || st.Rules != 2 || st.LastError == nil || !strings.Contains(*st.LastError, "500") {
		t.Errorf("/api/lists after a 500: %+v (error %v), want stale, 2 rules, the status in last_error", st, deref(st.LastError))
	}
	blockedFor("tcp", "127.0.0.2", "ads.example.", 10)

	// SIGHUP: the list is unchanged, its rules are kept (its server still
	// fails: nothing could be fetched again), the new TTL applies.
	if err := o.d.Reload(func() (*config.Config, error) { return config.Parse([]byte(src(20))) }); err != nil {
		t.Fatal(err)
	}
	blockedFor("udp", "127.0.0.2", "ads.example.", 20)
	notBlockedFor("udp", "127.0.0.1", "ads.example.")
}

// Each answer mode over the wire, with and without EDNS, for custom rules
// ("blocked by rule"); an Adblock exception in one list beats a hosts
// entry in another.
func TestBlockingAnswerModesOverTheWire(t *testing.T) {
	dir := t.TempDir()
	hosts := writeFile(t, dir, "hosts.txt", "0.0.0.0 track.example\n0.0.0.0 ads.example\n")
	exceptions := writeFile(t, dir, "exceptions.txt", "@@||track.example^\n")
	up := wiretest.NewServer(t, wiretest.Answer())
	for _, tt := range []struct {
		mode   string
		rcode  int
		answer string // the A record's address, "" for none
		soa    bool
	}{
		{"null", dns.RcodeSuccess, "0.0.0.0", false},
		{"nxdomain", dns.RcodeNameError, "", true},
		{"nodata", dns.RcodeSuccess, "", true},
		{"refused", dns.RcodeRefused, "", false},
		{"ip", dns.RcodeSuccess, "192.0.2.99", false},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			s := startDaemon(t, upstreamTOML(up.Addr)+fmt.Sprintf(`
[blocking]
answer = %q
answer_ip = ["192.0.2.99"]
block = ["||blocked.example^"]
[[blocking.lists]]
name = "hosts"
source = %q
[[blocking.lists]]
name = "exceptions"
source = %q
`, tt.mode, hosts, exceptions))
			for _, edns := range []bool{false, true} {
				for _, proto := range []string{"udp", "tcp"} {
					q := wiretest.Query("www.blocked.example.", dns.TypeA)
					q.AuthenticatedData = true
					if edns {
						q.SetEdns0(1232, true)
					}
					r := ask(t, proto, s.addr(proto), q)
					var got string
					if len(r.Answer) == 1 {
						got = r.Answer[0].(*dns.A).A.String()
					}
					soa := len(r.Ns) == 1 && r.Ns[0].Header().Rrtype == dns.TypeSOA
					wantEDE := ""
					if edns {
						wantEDE = "blocked by rule"
					}
					if r.Rcode != tt.rcode || got != tt.answer || soa != tt.soa || edeBlocked(r) != wantEDE || r.AuthenticatedData {
						t.Errorf("%s edns=%v: %s answer %q SOA %v EDE %q AD %v, want %s %q %v %q no AD", proto, edns,
							dns.RcodeToString[r.Rcode], got, soa, edeBlocked(r), r.AuthenticatedData, dns.RcodeToString[tt.rcode], tt.answer, tt.soa, wantEDE)
					}
				}
			}
			if r := ask(t, "udp", s.udp, withEDNS(wiretest.Query("ads.example.", dns.TypeA))); edeBlocked(r) != "blocked by hosts" {
				t.Errorf("ads.example.: EDE %q, want blocked by hosts", edeBlocked(r))
			}
			if r := ask(t, "udp", s.udp, withEDNS(wiretest.Query("track.example.", dns.TypeA))); edeBlocked(r) != "" || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
				t.Errorf("track.example.: EDE %q answers %v, want the exception to let it through", edeBlocked(r), r.Answer)
			}
		})
	}
}

// withEDNS adds an OPT record of 1232 bytes to q.
func withEDNS(q *dns.Msg) *dns.Msg {
	q.SetEdns0(1232, false)
	return q
}

// writeFile writes body to dir/name and returns its path.
func writeFile(tb testing.TB, dir, name, body string) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}
