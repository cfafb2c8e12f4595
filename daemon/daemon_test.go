package daemon

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// started is a daemon running on loopback for one test.
type started struct {
	d        *Daemon
	udp, tcp string
}

// startDaemon runs a daemon on the configuration src (TOML), listening on
// 127.0.0.1:0, with the admin server off unless src sets it.
func startDaemon(tb testing.TB, src string) *started {
	tb.Helper()
	if !strings.Contains(src, "[server]") {
		src = "[server]\nlisten = [\"127.0.0.1:0\"]\n" + src
	}
	if !strings.Contains(src, "[admin]") {
		src += "\n[admin]\nlisten = \"\"\n"
	}
	return runDaemon(tb, src, options{})
}

// runDaemon starts a daemon on the configuration src with the test seams
// opts, and shuts it down when the test ends. Unless src has a [cache]
// table the answer cache is off, and unless it has a [history] table the
// query history (withoutCacheOrHistory).
func runDaemon(tb testing.TB, src string, opts options) *started {
	tb.Helper()
	cfg, err := config.Parse([]byte(withoutCacheOrHistory(src)))
	if err != nil {
		tb.Fatalf("config: %v", err)
	}
	return startConfig(tb, cfg, nil, opts)
}

// startConfig starts a daemon on cfg with the logger log (nil: none) and
// the test seams opts, and shuts it down when the test ends.
func startConfig(tb testing.TB, cfg *config.Config, log *zap.Logger, opts options) *started {
	tb.Helper()
	d, err := newDaemon(cfg, log, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
	})
	udp, tcp := d.Addrs()
	return &started{d: d, udp: udp[0].String(), tcp: tcp[0].String()}
}

// addr returns the daemon's address for proto: with port 0 the UDP and
// TCP ports differ.
func (s *started) addr(proto string) string {
	if proto == "tcp" {
		return s.tcp
	}
	return s.udp
}

// withoutCacheOrHistory turns the answer cache off in src unless src
// configures it, and the query history likewise: a test of forwarding
// counts what reaches the upstreams, and the history's writer (SQLite,
// slow under -race) would take the CPU of a test under load. The
// history's tests (history_test.go) give a [history] table.
func withoutCacheOrHistory(src string) string {
	if !strings.Contains(src, "[cache]") {
		src += "\n[cache]\nenabled = false\n"
	}
	if !strings.Contains(src, "[history]") {
		src += "\n[history]\nenabled = false\n"
	}
	return src
}

func upstreamTOML(addrs ...string) string {
	var b strings.Builder
	for i, a := range addrs {
		fmt.Fprintf(&b, "[[upstreams]]\nname = \"up%d\"\naddress = \"udp://%s\"\n", i, a)
	}
	return b.String()
}

// ask sends m over proto to addr and returns the answer.
func ask(tb testing.TB, proto, addr string, m *dns.Msg) *dns.Msg {
	tb.Helper()
	c := &dns.Client{Net: proto, Timeout: 3 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		tb.Fatalf("%s query %s: %v", proto, m.Question[0].Name, err)
	}
	return r
}

func TestForwardsOverUDPAndTCP(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer(wiretest.A("example.com.", 0)))
	s := startDaemon(t, upstreamTOML(up.Addr))
	for _, proto := range []string{"udp", "tcp"} {
		q := wiretest.Query("Example.COM.", dns.TypeA)
		q.Id = 4242
		r := ask(t, proto, s.addr(proto), q)
		if r.Id != 4242 || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("%s: id=%d rcode=%s answers=%d", proto, r.Id, dns.RcodeToString[r.Rcode], len(r.Answer))
		}
		if r.Question[0].Name != "Example.COM." {
			t.Errorf("%s: question %q, want the client's own spelling", proto, r.Question[0].Name)
		}
	}
	if up.UDPQueries() != 2 {
		t.Errorf("upstream saw %d UDP queries, want 2", up.UDPQueries())
	}
}

func TestLargeAnswerTruncatedOverUDPWholeOverTCP(t *testing.T) {
	// 60 A records: ~1 KB, over 512 but under the upstream's EDNS size.
	big := make([]dns.RR, 60)
	for i := range big {
		big[i] = wiretest.A("big.example.", i)
	}
	up := wiretest.NewServer(t, wiretest.Answer(big...))
	s := startDaemon(t, upstreamTOML(up.Addr))

	q := wiretest.Query("big.example.", dns.TypeA)
	q.SetEdns0(512, false)
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second}
	r, _, err := c.Exchange(q, s.udp)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || len(r.Answer) >= 60 {
		t.Errorf("UDP with EDNS 512: TC=%v with %d answers, want truncated", r.Truncated, len(r.Answer))
	}
	r.Compress = true // as it came on the wire
	if n := r.Len(); n > 512 {
		t.Errorf("UDP answer is %d bytes, over the client's 512", n)
	}
	r = ask(t, "tcp", s.tcp, q)
	if r.Truncated || len(r.Answer) != 60 {
		t.Errorf("TCP: TC=%v with %d answers, want all 60", r.Truncated, len(r.Answer))
	}
}

func TestAnsweredLocally(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Rcode(dns.RcodeRefused))
	s := startDaemon(t, upstreamTOML(up.Addr)+`
[[local_records]]
name = "nas.lan"
type = "A"
value = "192.168.1.10"
`)
	for _, tc := range []struct {
		name    string
		qtype   uint16
		rcode   int
		answers int
	}{
		{"localhost.", dns.TypeA, dns.RcodeSuccess, 1},
		{"db.localhost.", dns.TypeAAAA, dns.RcodeSuccess, 1},
		{"invalid.", dns.TypeA, dns.RcodeNameError, 0},
		{"x.invalid.", dns.TypeA, dns.RcodeNameError, 0},
		{"1.0.0.127.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, 1},
		{"NAS.lan.", dns.TypeA, dns.RcodeSuccess, 1},
		{"nas.lan.", dns.TypeAAAA, dns.RcodeSuccess, 0}, // NODATA
	} {
		r := ask(t, "udp", s.udp, wiretest.Query(tc.name, tc.qtype))
		if r.Rcode != tc.rcode || len(r.Answer) != tc.answers {
			t.Errorf("%s %s: rcode %s with %d answers, want %s with %d", tc.name, dns.TypeToString[tc.qtype],
				dns.RcodeToString[r.Rcode], len(r.Answer), dns.RcodeToString[tc.rcode], tc.answers)
		}
	}
	if n := up.UDPQueries() + up.TCPQueries(); n != 0 {
		t.Errorf("the upstream saw %d queries for names answered locally", n)
	}
}

func TestRejectsBadQueriesAndKeepsServing(t *testing.T) {
	up := wiretest.NewServer(t, wiretest.Answer(wiretest.A("example.com.", 0)))
	s := startDaemon(t, upstreamTOML(up.Addr))

	notify := wiretest.Query("example.com.", dns.TypeA)
	notify.Opcode = dns.OpcodeNotify
	if r := ask(t, "udp", s.udp, notify); r.Rcode != dns.RcodeNotImplemented {
		t.Errorf("NOTIFY: %s, want NOTIMP", dns.RcodeToString[r.Rcode])
	}
	two := wiretest.Query("example.com.", dns.TypeA)
	two.Question = append(two.Question, dns.Question{Name: "example.org.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	if r := ask(t, "udp", s.udp, two); r.Rcode != dns.RcodeFormatError {
		t.Errorf("two questions: %s, want FORMERR", dns.RcodeToString[r.Rcode])
	}

	// Garbage on both listeners, then ordinary queries still work.
	uc, err := net.Dial("udp", s.udp)
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	for _, g := range [][]byte{{1}, {0xde, 0xad, 0xbe, 0xef}, make([]byte, 512)} {
		if _, err := uc.Write(g); err != nil {
			t.Fatal(err)
		}
	}
	tc, err := net.Dial("tcp", s.tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if _, err := tc.Write([]byte{0, 20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}); err != nil {
		t.Fatal(err)
	}
	for _, proto := range []string{"udp", "tcp"} {
		if r := ask(t, proto, s.addr(proto), wiretest.Query("example.com.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
			t.Errorf("%s after garbage: %s", proto, dns.RcodeToString[r.Rcode])
		}
	}
}

func TestForwardZonesLongestSuffix(t *testing.T) {
	lan := wiretest.NewServer(t, wiretest.Answer(wiretest.A("nas.lan.", 1)))
	iot := wiretest.NewServer(t, wiretest.Answer(wiretest.A("cam.iot.lan.", 2)))
	pool := wiretest.NewServer(t, wiretest.Answer(wiretest.A("xlan.", 3)))
	s := startDaemon(t, upstreamTOML(pool.Addr)+fmt.Sprintf(`
[[forward_zones]]
zone = "lan."
resolver = %q
[[forward_zones]]
zone = "iot.lan."
resolver = %q
`, lan.Addr, iot.Addr))
	for _, tc := range []struct {
		name string
		srv  *wiretest.Server
	}{{"nas.lan.", lan}, {"cam.iot.lan.", iot}, {"xlan.", pool}, {"lan.", lan}} {
		before := tc.srv.UDPQueries()
		if r := ask(t, "udp", s.udp, wiretest.Query(tc.name, dns.TypeA)); r.Rcode != dns.RcodeSuccess {
			t.Errorf("%s: %s", tc.name, dns.RcodeToString[r.Rcode])
		}
		if tc.srv.UDPQueries() != before+1 {
			t.Errorf("%s did not go to the expected resolver", tc.name)
		}
	}
}

// A truncated UDP answer and a TCP resolver that stalls end with SERVFAIL,
// the TCP fallback tried. That the two share one read timeout, not two, is
// tested exactly under synctest (query/forward's TestClientOneBudget).
func TestForwardZoneOneReadTimeout(t *testing.T) {
	const readTimeout = 400 * time.Millisecond
	tcpReached := make(chan string, 1)
	lan := wiretest.NewServer(t, wiretest.ByProto(wiretest.Truncating(1), wiretest.Notify(tcpReached, wiretest.Stall)))
	pool := wiretest.NewServer(t, wiretest.Answer())
	s := startDaemon(t, upstreamTOML(pool.Addr)+fmt.Sprintf(`
[upstream]
read_timeout_ms = %d
[[forward_zones]]
zone = "lan."
resolver = %q
`, readTimeout.Milliseconds(), lan.Addr))
	r := ask(t, "udp", s.udp, wiretest.Query("nas.lan.", dns.TypeA))
	if r.Rcode != dns.RcodeServerFailure {
		t.Errorf("rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	select {
	case <-tcpReached:
	default:
		t.Error("the TCP fallback was never tried")
	}
}
