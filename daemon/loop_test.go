package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	zapobserver "go.uber.org/zap/zaptest/observer"

	"github.com/nxdnsd/nxdnsd/admin"
	"github.com/nxdnsd/nxdnsd/config"
	"github.com/nxdnsd/nxdnsd/wire/transport"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// Forwarding loops over real sockets (issue 16, finding 1): nxdnsd as its
// own upstream, and two nxdnsd forwarding to each other. The configuration
// check refuses an upstream that is one of nxdnsd's own listeners, and a
// listener's port is known only once it is bound: so each daemon's one
// upstream is a udp:// transport made after the daemons have started, to
// the address they bound (lateUpstream, through the exchanger seam).

// loopWarning starts the one line the daemon logs when it finds a loop.
const loopWarning = "forwarding loop: "

// loopBackoffMax is the tests' upstream.backoff_max_ms: a looping upstream
// is checked again only this long after the loop was found, longer than
// any test runs.
const loopBackoffMax = 30 * time.Second

// lateUpstream is an upstream whose address is known only once the
// daemons have bound their listeners. Before to is called an exchange
// fails as a socket with nobody listening does; after, it goes over a real
// udp:// transport to that address.
type lateUpstream struct {
	mu sync.Mutex          // guards t
	t  transport.Transport // or nil before to
}

func (l *lateUpstream) Exchange(ctx context.Context, q *transport.Query, expiry time.Time) (transport.Answer, error) {
	l.mu.Lock()
	t := l.t
	l.mu.Unlock()
	if t == nil {
		return transport.Answer{}, &net.OpError{Op: "read", Net: "udp", Err: syscall.ECONNREFUSED}
	}
	return t.Exchange(ctx, q, expiry)
}

// to points l at ap over UDP from now on; the transport is closed when the
// test ends, after the daemon (cleanups run last first, and the daemon's
// was registered before).
func (l *lateUpstream) to(tb testing.TB, ap string) {
	tb.Helper()
	addr, err := transport.ParseAddress("udp://" + ap)
	if err != nil {
		tb.Fatal(err)
	}
	t, err := transport.NewTransport(addr)
	if err != nil {
		tb.Fatal(err)
	}
	l.mu.Lock()
	l.t = t
	l.mu.Unlock()
	tb.Cleanup(func() { _ = t.Close() })
}

// loopDaemon is a daemon of the loop tests: its upstream, what it logs.
type loopDaemon struct {
	*observed
	up   *lateUpstream
	name string
	logs *zapobserver.ObservedLogs
}

// startLoopDaemon runs a daemon on 127.0.0.1:0 whose one upstream, "next",
// is a lateUpstream, with the admin server on 127.0.0.1:0 and the answer
// cache on, as shipped. A failed start-up probe puts the upstream into a
// backoff of 100 ms, after which its check goes out again. When the
// daemon logs the loop warning, found hears its name.
func startLoopDaemon(tb testing.TB, name string, found chan<- string) *loopDaemon {
	tb.Helper()
	return startLoopDaemonWith(tb, name, found, "")
}

// startLoopDaemonWith is startLoopDaemon with more TOML after the
// upstream "next": more upstreams (after it in priority, over their own
// transports), a query log.
func startLoopDaemonWith(tb testing.TB, name string, found chan<- string, more string) *loopDaemon {
	tb.Helper()
	src := `
[server]
listen = ["127.0.0.1:0"]
[admin]
listen = "127.0.0.1:0"
[upstream]
backoff_ms = 100
backoff_max_ms = 30000
[[upstreams]]
name = "next"
address = "udp://192.0.2.1:53" # never used: lateUpstream stands in for it
` + more
	cfg, err := config.Parse([]byte(src))
	if err != nil {
		tb.Fatal(err)
	}
	ld := &loopDaemon{up: &lateUpstream{}, name: name}
	core, logs := zapobserver.New(zap.InfoLevel)
	ld.logs = logs
	log := zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		if strings.HasPrefix(e.Message, loopWarning) {
			select {
			case found <- name:
			default: // the test waits for the first
			}
		}
		return nil
	}))
	st := startConfig(tb, cfg, log, options{exchanger: func(i int, t transport.Exchanger) transport.Exchanger {
		if i == 0 {
			return ld.up
		}
		return t
	}})
	ld.observed = &observed{started: st, admin: "http://" + st.d.AdminAddr().String()}
	return ld
}

// served is the number of client queries the daemon has answered.
func (ld *loopDaemon) served() uint64 { return ld.d.metrics.Totals().Queries }

// warnings is the number of loop warnings logged.
func (ld *loopDaemon) warnings() int {
	return ld.logs.FilterMessageSnippet(loopWarning).FilterLevelExact(zapcore.WarnLevel).Len()
}

// waitFound waits for a daemon to find the loop and returns its name.
// The deadline only bounds a failure.
func waitFound(tb testing.TB, found <-chan string) string {
	tb.Helper()
	select {
	case name := <-found:
		return name
	case <-time.After(10 * time.Second):
		tb.Fatal("no daemon found the loop within 10 s")
		return ""
	}
}

// quiet observes the daemons for window and fails the test if they serve
// a query meanwhile: the loop carries nothing round any more. The window
// is observed, it waits for nothing.
func quiet(tb testing.TB, window time.Duration, ds ...*loopDaemon) {
	tb.Helper()
	before := make([]uint64, len(ds))
	for i, d := range ds {
		before[i] = d.served()
	}
	<-time.After(window)
	for i, d := range ds {
		if n := d.served(); n != before[i] {
			tb.Errorf("daemon %d served %d queries in a quiet window of %v", i, n-before[i], window)
		}
	}
}

// requireLoop checks /api/health: the upstream "next" is in loop, with the
// reason and its next check backoff_max_ms after the loop was found, and
// the body is what openapi.yaml describes.
func (ld *loopDaemon) requireLoop(tb testing.TB, name string) {
	tb.Helper()
	code, h := ld.health(tb)
	if code != http.StatusServiceUnavailable || h.Status != admin.StatusDown || len(h.Upstreams) != 1 {
		tb.Fatalf("%s: /api/health %d %s, want 503 down with one upstream", name, code, h.Status)
	}
	u := h.Upstreams[0]
	if u.Name != "next" || u.State != admin.StateLoop || u.LastError == nil || !strings.Contains(*u.LastError, "forwarding loop") {
		tb.Errorf("%s: /api/health shows %s as %s, last error %v; want loop, with the reason", name, u.Name, u.State, u.LastError)
	}
	if u.BackoffUntil == nil || u.LastErrorAt == nil || u.BackoffUntil.Sub(*u.LastErrorAt) != loopBackoffMax {
		tb.Errorf("%s: next check at %v, loop found at %v; want backoff_max_ms apart", name, u.BackoffUntil, u.LastErrorAt)
	}
}

// nxdnsd as its own upstream: its check comes back through its own
// listener and the upstream is out of service; one client query is then
// answered SERVFAIL without being forwarded. The daemon has served two
// queries in all, the check and the client's, and serves none in the
// quiet window after; its next check is 30 s away. The loop is logged
// once, and /api/health names it.
//
// Mutation check: without the check in answerSpecial, the check is answered
// NXDOMAIN by the special-use names, nothing is found, and the client's
// query goes round until every slot is taken (the 32 SERVFAILs
// every few seconds); the wait for the loop times out.
func TestLoopToItself(t *testing.T) {
	found := make(chan string, 1)
	a := startLoopDaemon(t, "a", found)
	a.up.to(t, a.udp)
	waitFound(t, found)
	r := ask(t, "udp", a.udp, wiretest.Query("example.com.", dns.TypeA))
	if r.Rcode != dns.RcodeServerFailure {
		t.Errorf("the client's query: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	quiet(t, time.Second, a)
	if n := a.served(); n != 2 {
		t.Errorf("served %d queries, want 2: the loop check and the client's query", n)
	}
	t.Logf("nxdnsd as its own upstream: %d queries served", a.served())
	a.requireLoop(t, "a")
	if n := a.warnings(); n != 1 {
		t.Errorf("the loop was logged %d times at warn, want once", n)
	}
	if st := a.d.Pool().Status()[0]; st.InFlight != 0 || st.Successes+st.Failures != 0 {
		t.Errorf("upstream %+v: want nothing in flight, no client query recorded against it", st)
	}
}

// Two nxdnsd forwarding to each other: each one's check goes through the
// other, which forwards it (it is not its own), and comes back. The loop
// is found by one of them, or by both when their checks cross, and one is
// enough to break it: a client query is answered SERVFAIL, the two serve
// a handful of queries in all, and none once the checks and probes in
// flight when the loop was found have ended (on loopback, within
// milliseconds: the test gives them a second).
//
// Mutation check: answering another nxdnsd's check NXDOMAIN (the
// special-use names, without the ForeignLoopCheck branch) keeps every
// check from coming back: no loop is found, and the client's query goes
// round between the two.
func TestLoopThroughAnotherNxdnsd(t *testing.T) {
	found := make(chan string, 2)
	a, b := startLoopDaemon(t, "a", found), startLoopDaemon(t, "b", found)
	a.up.to(t, b.udp)
	b.up.to(t, a.udp)
	first := waitFound(t, found)
	r := ask(t, "udp", a.udp, wiretest.Query("example.com.", dns.TypeA))
	if r.Rcode != dns.RcodeServerFailure {
		t.Errorf("the client's query: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	<-time.After(time.Second) // the checks and probes in flight end
	quiet(t, time.Second, a, b)
	na, nb := a.served(), b.served()
	var looping []string
	for _, d := range []*loopDaemon{a, b} {
		switch n := d.warnings(); {
		case n > 1:
			t.Errorf("%s logged the loop %d times, want at most once", d.name, n)
		case n == 1:
			looping = append(looping, d.name)
			d.requireLoop(t, d.name)
		}
	}
	t.Logf("a and b forwarding to each other: the loop found first by %s, by %v in all; %d and %d queries served", first, looping, na, nb)
	if na+nb >= 10 {
		t.Errorf("a served %d queries and b %d, want under 10 in all", na, nb)
	}
}

// The address each daemon bound is a loopback address: the configuration
// check (config.selfUpstreams) would have refused it as an upstream.
func TestLoopTestsDodgeTheConfigCheck(t *testing.T) {
	a := startLoopDaemon(t, "a", make(chan string, 1))
	ap := netip.MustParseAddrPort(a.udp)
	src := "[server]\nlisten = [\"" + a.udp + "\"]\n[[upstreams]]\naddress = \"udp://" + ap.String() + "\"\n"
	if _, err := config.Parse([]byte(src)); err == nil || !strings.Contains(err.Error(), "upstreams[0].address") {
		t.Errorf("the configuration check accepted nxdnsd as its own upstream: %v", err)
	}
}

// noUpstreamError is what the daemon logs, at error, when a loop it found
// leaves no upstream in service.
const noUpstreamError = "no upstream is left in service"

// errorsLogged returns the error-level entries whose message holds snippet.
func (ld *loopDaemon) errorsLogged(snippet string) []zapobserver.LoggedEntry {
	return ld.logs.FilterMessageSnippet(snippet).FilterLevelExact(zapcore.ErrorLevel).All()
}

// A loop that takes out the last upstream in service is logged at error,
// once, saying why: every query now fails. With another upstream still in
// service the loop is a warning alone.
//
// Fails before this line existed: the only sign of an nxdnsd that answers
// every query SERVFAIL was a warning.
func TestLoopLeavingNoUpstreamLogsAnError(t *testing.T) {
	t.Run("the only upstream loops", func(t *testing.T) {
		found := make(chan string, 1)
		a := startLoopDaemon(t, "a", found)
		a.up.to(t, a.udp)
		waitFound(t, found)
		a.d.Pool().Sync()
		es := a.errorsLogged(noUpstreamError)
		if len(es) != 1 {
			t.Fatalf("%d error lines %q, want 1; logged: %v", len(es), noUpstreamError, a.logs.All())
		}
		f := es[0].ContextMap()
		if f["upstream"] != "next" || !slices.Equal(anySlice(f["looping"]), []any{"next"}) {
			t.Errorf("the error line's fields %v, want upstream next, looping [next]", f)
		}
		if r := ask(t, "udp", a.udp, wiretest.Query("example.com.", dns.TypeA)); r.Rcode != dns.RcodeServerFailure {
			t.Errorf("a client query: %s, want SERVFAIL, as the line says", dns.RcodeToString[r.Rcode])
		}
	})
	t.Run("another upstream answers", func(t *testing.T) {
		other := wiretest.NewServer(t, wiretest.Answer())
		found := make(chan string, 1)
		a := startLoopDaemonWith(t, "a", found, "[[upstreams]]\nname = \"other\"\naddress = \"udp://"+other.Addr+"\"\n")
		a.up.to(t, a.udp)
		waitFound(t, found)
		a.d.Pool().Sync()
		if es := a.errorsLogged(noUpstreamError); len(es) != 0 {
			t.Errorf("error lines %v with an upstream in service", es)
		}
		if r := ask(t, "udp", a.udp, wiretest.Query("example.com.", dns.TypeA)); r.Rcode != dns.RcodeSuccess {
			t.Errorf("a client query: %s, want an answer from the other upstream", dns.RcodeToString[r.Rcode])
		}
	})
}

// anySlice is v as a []any (zap's observer keeps an array field as it was
// given, a []string here), or nil.
func anySlice(v any) []any {
	switch v := v.(type) {
	case []any:
		return v
	case []string:
		out := make([]any, len(v))
		for i, s := range v {
			out[i] = s
		}
		return out
	}
	return nil
}

// Names under loop-check.nxdnsd.invalid. stay out of the query log, of
// /api/queries and so of the status page: the check that came back, and
// names that merely look like one (answered NXDOMAIN, as any name under
// invalid.). They are still counted in the metrics.
//
// Fails before: the check that came back was the query log's first line.
func TestLoopChecksStayOutOfTheQueryLog(t *testing.T) {
	found := make(chan string, 1)
	logPath := filepath.Join(t.TempDir(), "query.log")
	a := startLoopDaemonWith(t, "a", found, fmt.Sprintf("[query_log]\npath = %q\n", logPath))
	a.up.to(t, a.udp)
	waitFound(t, found)
	a.d.Pool().Sync()
	for _, name := range []string{"loop-check.nxdnsd.invalid.", "x.LOOP-CHECK.nxdnsd.invalid.", strings.Repeat("a", 16) + ".00000001.00000001.loop-check.nxdnsd.invalid."} {
		if r := ask(t, "udp", a.udp, wiretest.Query(name, dns.TypeTXT)); r.Rcode != dns.RcodeNameError {
			t.Errorf("%s: %s, want NXDOMAIN", name, dns.RcodeToString[r.Rcode])
		}
	}
	ask(t, "udp", a.udp, wiretest.Query("localhost.", dns.TypeA))
	if n := a.served(); n != 5 {
		t.Errorf("the metrics counted %d queries, want 5: the check, three look-alikes, localhost.", n)
	}
	a.d.qlog.Sync()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := parseLines(t, data)
	if len(lines) != 1 || lines[0].qname() != "localhost." {
		t.Errorf("query log:\n%s\nwant the line for localhost. alone", data)
	}
	_, recent := a.recentQueries(t, "")
	if len(recent) != 1 || !strings.Contains(string(recent[0]), `"localhost."`) {
		t.Errorf("/api/queries: %s, want localhost. alone", recent)
	}
}
