package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

// The load of TestSoak: the kinds of client queries and what may answer
// each, the misbehaving clients, and the tally of what they all saw.

// soakKind is one kind of client query and what may answer it. Every kind
// may also be REFUSED: the bursts push the daemon past its cap.
type soakKind struct {
	name  string
	query func(rng *rand.Rand) *dns.Msg
	ok    func(r *dns.Msg, proto string) bool
}

var soakKinds = []soakKind{
	{"special", func(*rand.Rand) *dns.Msg { return wiretest.Query("localhost.", dns.TypeA) },
		func(r *dns.Msg, _ string) bool { return r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 }},
	{"local", func(rng *rand.Rand) *dns.Msg {
		return wiretest.Query([]string{"nas.lan.", "files.lan.", "NAS.Lan."}[rng.IntN(3)], dns.TypeA)
	}, func(r *dns.Msg, _ string) bool { return r.Rcode == dns.RcodeSuccess && len(r.Answer) >= 1 }},
	{"zone", func(rng *rand.Rand) *dns.Msg { return wiretest.Query(soakLabel(rng)+".home.", dns.TypeA) },
		func(r *dns.Msg, _ string) bool { return r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 }},
	{"zone-stalled", func(rng *rand.Rand) *dns.Msg { return wiretest.Query(soakLabel(rng)+".stall.home.", dns.TypeA) },
		func(r *dns.Msg, _ string) bool { return r.Rcode == dns.RcodeServerFailure }},
	{"zone-truncated", func(rng *rand.Rand) *dns.Msg { return wiretest.Query(soakLabel(rng)+".big.home.", dns.TypeA) },
		func(r *dns.Msg, proto string) bool {
			// The resolver's whole answer came over TCP; a UDP client gets
			// what fits in 512 bytes, with TC set.
			if r.Rcode != dns.RcodeSuccess {
				return r.Rcode == dns.RcodeServerFailure // the 100 ms read timeout, on a busy machine
			}
			return len(r.Answer) == 40 || (proto == "udp" && r.Truncated)
		}},
	{"pool", func(rng *rand.Rand) *dns.Msg { return wiretest.Query(soakLabel(rng)+".example.com.", dns.TypeA) },
		func(r *dns.Msg, _ string) bool {
			return (r.Rcode == dns.RcodeSuccess && len(r.Answer) >= 1) || r.Rcode == dns.RcodeServerFailure
		}},
	// Every upstream fails these (soakUpstream): out of upstreams, or of
	// budget.
	{"pool-refused", func(rng *rand.Rand) *dns.Msg {
		return wiretest.Query("refuse-"+soakLabel(rng)+".example.com.", dns.TypeA)
	}, func(r *dns.Msg, _ string) bool { return r.Rcode == dns.RcodeServerFailure }},
	{"pool-stalled", func(rng *rand.Rand) *dns.Msg {
		return wiretest.Query("stall-"+soakLabel(rng)+".example.com.", dns.TypeA)
	}, func(r *dns.Msg, _ string) bool { return r.Rcode == dns.RcodeServerFailure }},
	{"pool-edns", func(rng *rand.Rand) *dns.Msg {
		q := wiretest.Query(soakLabel(rng)+".example.net.", dns.TypeAAAA)
		q.SetEdns0(1232, true)
		return q
	}, func(r *dns.Msg, _ string) bool {
		return r.IsEdns0() != nil && (r.Rcode == dns.RcodeSuccess || r.Rcode == dns.RcodeServerFailure)
	}},
	{"formerr", func(*rand.Rand) *dns.Msg {
		q := wiretest.Query("two.example.", dns.TypeA)
		q.Question = append(q.Question, q.Question[0])
		return q
	}, func(r *dns.Msg, _ string) bool { return r.Rcode == dns.RcodeFormatError }},
	{"notimp", func(*rand.Rand) *dns.Msg {
		q := wiretest.Query("notify.example.", dns.TypeSOA)
		q.Opcode = dns.OpcodeNotify
		return q
	}, func(r *dns.Msg, _ string) bool { return r.Rcode == dns.RcodeNotImplemented }},
}

func soakLabel(rng *rand.Rand) string { return fmt.Sprintf("q%d", rng.IntN(1000)) }

// soakUpstream answers like h, except names whose first label starts with
// "refuse" (REFUSED) or "stall" (no answer at all): with it the upstreams
// that answer fail those queries too, so that the pool runs out of
// upstreams or of budget, and healthy upstreams go through backoff.
func soakUpstream(h wiretest.Handler) wiretest.Handler {
	return func(w *wiretest.Writer, q *dns.Msg) {
		switch name := strings.ToLower(q.Question[0].Name); {
		case strings.HasPrefix(name, "refuse"):
			wiretest.Rcode(dns.RcodeRefused)(w, q)
		case strings.HasPrefix(name, "stall"):
			wiretest.Stall(w, q)
		default:
			h(w, q)
		}
	}
}

// soakTally counts what the soak's clients saw, by kind and protocol and
// then by outcome: the rcode of an expected answer, "REFUSED" (over the
// cap), "timeout", or "ok" for the abusers' and scrapers' checks. Every
// goroutine of the soak records into it.
type soakTally struct {
	mu       sync.Mutex                // guards following
	counts   map[string]map[string]int // kind/proto -> outcome -> n
	failures []string                  // the first few wrong answers
	nfail    int
}

func newSoakTally() *soakTally { return &soakTally{counts: make(map[string]map[string]int)} }

func (st *soakTally) count(kind, outcome string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.counts[kind] == nil {
		st.counts[kind] = make(map[string]int)
	}
	st.counts[kind][outcome]++
}

func (st *soakTally) fail(format string, args ...any) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.nfail++
	if len(st.failures) < 10 {
		st.failures = append(st.failures, fmt.Sprintf(format, args...))
	}
}

// answer records the outcome of one client exchange.
func (st *soakTally) answer(k soakKind, proto string, q, r *dns.Msg, err error) {
	name := k.name + "/" + proto
	switch {
	case isNetTimeout(err):
		st.count(name, "timeout")
	case err != nil:
		st.fail("%s %s: %v", name, q.Question[0].Name, err)
	case r.Id != q.Id:
		st.fail("%s %s: answer ID %d, want %d", name, q.Question[0].Name, r.Id, q.Id)
	case r.Rcode == dns.RcodeRefused:
		st.count(name, "REFUSED")
	case !k.ok(r, proto):
		st.fail("%s %s: unexpected answer %s with %d records (TC %v)",
			name, q.Question[0].Name, dns.RcodeToString[r.Rcode], len(r.Answer), r.Truncated)
	default:
		st.count(name, dns.RcodeToString[r.Rcode])
	}
}

// report logs what was seen and fails t on wrong answers, on a kind never
// answered, and on more than a few lost answers. overloaded is the
// daemon's nxdns_overload_refused_total.
func (st *soakTally) report(t *testing.T, took time.Duration, overloaded float64) {
	t.Helper()
	st.mu.Lock()
	defer st.mu.Unlock()
	kinds := make([]string, 0, len(st.counts))
	total, timeouts, refused := 0, 0, 0
	for k, c := range st.counts {
		kinds = append(kinds, k)
		for outcome, n := range c {
			total += n
			switch outcome {
			case "timeout":
				timeouts += n
			case "REFUSED":
				refused += n
			}
		}
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		c := st.counts[k]
		t.Logf("%-20s %v", k, c)
		if c["timeout"]+c["REFUSED"] == sum(c) {
			t.Errorf("%s: never answered", k)
		}
	}
	t.Logf("%d exchanges in %v (%.0f/s); %d REFUSED seen, nxdns_overload_refused_total %v; %d client timeouts",
		total, took.Round(time.Millisecond), float64(total)/took.Seconds(), refused, overloaded, timeouts)
	for _, f := range st.failures {
		t.Error(f)
	}
	if st.nfail > len(st.failures) {
		t.Errorf("... and %d more wrong answers", st.nfail-len(st.failures))
	}
	// Every REFUSED is the overload's; some of the overload's may have
	// reached a client that had stopped waiting.
	if float64(refused) > overloaded {
		t.Errorf("clients saw %d REFUSED, the daemon counted %v", refused, overloaded)
	}
	if timeouts*100 > total {
		t.Errorf("%d of %d exchanges went unanswered", timeouts, total)
	}
}

func sum(outcomes map[string]int) int {
	n := 0
	for _, c := range outcomes {
		n += c
	}
	return n
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// soakClient sends queries of every kind one after another, over UDP and
// TCP at random.
func soakClient(ctx context.Context, s *started, seed uint64, st *soakTally) {
	rng := rand.New(rand.NewPCG(seed, 0x50a4))
	for range soakQueriesPerClient {
		if soakOver(ctx) {
			return
		}
		k := soakKinds[rng.IntN(len(soakKinds))]
		proto := []string{"udp", "tcp"}[rng.IntN(2)]
		q := k.query(rng)
		// The context's deadline, not Client.Timeout, bounds an exchange
		// made with one.
		qctx, cancel := context.WithTimeout(ctx, soakClientTimeout)
		r, _, err := (&dns.Client{Net: proto}).ExchangeContext(qctx, q, s.addr(proto))
		cancel()
		if soakOver(ctx) {
			return // cut short by the end of the soak, not the daemon's doing
		}
		st.answer(k, proto, q, r, err)
	}
}

// soakOver reports whether the soak's time is up. It reads the clock: at
// the deadline a connection's timer can fire before ctx's own, and a
// context derived from ctx then is done at once while ctx.Err is still nil.
func soakOver(ctx context.Context) bool {
	d, _ := ctx.Deadline()
	return ctx.Err() != nil || !time.Now().Before(d)
}

// soakBursts sends soakBurst pool queries at once from one socket, a few
// times a second, pushing the daemon past its cap of 32: each must be
// answered, REFUSED when over the cap.
func soakBursts(ctx context.Context, addr string, st *soakTally) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		soakBurstOnce(addr, st)
	}
}

func soakBurstOnce(addr string, st *soakTally) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		st.fail("burst: %v", err)
		return
	}
	defer c.Close()
	for id := range uint16(soakBurst) {
		q := wiretest.Query(fmt.Sprintf("burst%d.example.org.", id), dns.TypeA)
		q.Id = id
		b, err := q.Pack()
		if err == nil {
			_, err = c.Write(b)
		}
		if err != nil {
			st.fail("burst: sending: %v", err)
			return
		}
	}
	dc := &dns.Conn{Conn: c}
	c.SetReadDeadline(time.Now().Add(soakClientTimeout))
	seen := make(map[uint16]bool, soakBurst)
	for len(seen) < soakBurst {
		r, err := dc.ReadMsg()
		if err != nil {
			if isNetTimeout(err) {
				for range soakBurst - len(seen) {
					st.count("burst/udp", "timeout")
				}
			} else {
				st.fail("burst: reading: %v", err)
			}
			return
		}
		switch {
		case r.Id >= soakBurst || seen[r.Id]:
			st.fail("burst: answer ID %d unexpected or twice", r.Id)
			return
		case r.Rcode == dns.RcodeRefused:
			st.count("burst/udp", "REFUSED")
		case r.Rcode == dns.RcodeSuccess || r.Rcode == dns.RcodeServerFailure:
			st.count("burst/udp", dns.RcodeToString[r.Rcode])
		default:
			st.fail("burst: answer %s", dns.RcodeToString[r.Rcode])
		}
		seen[r.Id] = true
	}
}

// soakAbuse keeps misbehaving: TCP clients that announce a length they
// never send, stop in the middle of a length prefix, send a zero-length
// message or go at once; pipelined queries on one connection; datagrams of
// garbage. The liars must be disconnected within the idle timeout (300
// ms; the check allows far more), while everyone else is served.
func soakAbuse(ctx context.Context, s *started, st *soakTally) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	rng := rand.New(rand.NewPCG(99, 0xab05e))
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		switch i % 6 {
		case 0:
			soakDisconnected(s.tcp, "lying-length", []byte{0, 40, 1, 2, 3}, st)
		case 1:
			soakDisconnected(s.tcp, "half-prefix", []byte{0}, st)
		case 2:
			soakDisconnected(s.tcp, "zero-length", []byte{0, 0}, st)
		case 3:
			if c, err := net.Dial("tcp", s.tcp); err == nil {
				c.Close()
				st.count("abuse/hang-up", "ok")
			} else {
				st.fail("hang-up: %v", err)
			}
		case 4:
			soakPipelined(s.tcp, st)
		case 5:
			if c, err := net.Dial("udp", s.udp); err == nil {
				junk := make([]byte, 1+rng.IntN(100))
				for j := range junk {
					junk[j] = byte(rng.Uint32())
				}
				c.Write(junk) // answered FORMERR, or dropped; nobody listens
				c.Close()
				st.count("abuse/garbage", "ok")
			}
		}
	}
}

// soakDisconnected sends b on a new TCP connection and expects the daemon
// to close it.
func soakDisconnected(addr, name string, b []byte, st *soakTally) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		st.fail("%s: %v", name, err)
		return
	}
	defer c.Close()
	if _, err := c.Write(b); err != nil {
		st.fail("%s: writing: %v", name, err)
		return
	}
	c.SetReadDeadline(time.Now().Add(soakClientTimeout))
	var buf [64]byte
	n, err := c.Read(buf[:])
	switch {
	case n > 0:
		st.fail("%s: read %d bytes, want the connection closed", name, n)
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		st.count("abuse/"+name, "ok")
	case isNetTimeout(err):
		st.fail("%s: still open after %v", name, soakClientTimeout)
	default:
		st.fail("%s: %v", name, err)
	}
}

// soakPipelined sends five queries on one TCP connection before reading,
// and expects five answers, in any order.
func soakPipelined(addr string, st *soakTally) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		st.fail("pipelined: %v", err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(soakClientTimeout))
	var frames []byte
	for id := range uint16(5) {
		q := wiretest.Query("localhost.", dns.TypeA)
		q.Id = 100 + id
		b, err := q.Pack()
		if err != nil {
			st.fail("pipelined: %v", err)
			return
		}
		frames = binary.BigEndian.AppendUint16(frames, uint16(len(b)))
		frames = append(frames, b...)
	}
	if _, err := c.Write(frames); err != nil {
		st.fail("pipelined: writing: %v", err)
		return
	}
	dc := &dns.Conn{Conn: c}
	seen := map[uint16]bool{}
	for range 5 {
		r, err := dc.ReadMsg()
		switch {
		case isNetTimeout(err):
			st.count("abuse/pipelined", "timeout")
			return
		case err != nil:
			st.fail("pipelined: reading: %v", err)
			return
		case r.Id < 100 || r.Id >= 105 || seen[r.Id]:
			st.fail("pipelined: answer ID %d unexpected or twice", r.Id)
			return
		case r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeRefused:
			st.fail("pipelined: %s", dns.RcodeToString[r.Rcode])
			return
		}
		seen[r.Id] = true
	}
	st.count("abuse/pipelined", "ok")
}

// soakScrapes reads /metrics and /api/health once a second, as a
// monitoring system would during the soak.
func soakScrapes(ctx context.Context, c *http.Client, admin string, st *soakTally) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, path := range []string{"/metrics", "/api/health"} {
			resp, err := c.Get(admin + path)
			if err != nil {
				st.fail("GET %s: %v", path, err)
				continue
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			// Health is 503 while every upstream is in backoff, which the
			// failing upstreams make likely at times.
			if err != nil || (resp.StatusCode != http.StatusOK && !(path == "/api/health" && resp.StatusCode == http.StatusServiceUnavailable)) {
				st.fail("GET %s: %d %v", path, resp.StatusCode, err)
				continue
			}
			st.count("scrape"+path, "ok")
		}
	}
}
