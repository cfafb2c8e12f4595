package transport

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// The off-path spoofer of RFC 5452 (issue 16): 600 queries through a UDP
// transport, 20 in flight at once, to an upstream that reads each query
// and, before it answers, has a spoofer send 1,000 forged answers to its
// question from the upstream's own address and port, with random IDs: half
// to the source ports of the queries answered so far, half to random ports
// of the kernel's ephemeral range. An off-path spoofer cannot see the port
// of the query it races, but may have seen earlier ones: when ports are
// reused, those are worth trying. The forged answers all arrive before
// the true one, while many exchanges wait on their sockets. Not one may
// be taken for an answer. Under the race detector, or -short, 100 forged
// answers per query.
//
// The test runs in a network namespace of its own: its random ports reach
// no socket of another test.
//
// Before the fix, on the shared socket (one port for 4,096 queries), the
// ports seen so far were the live socket's, and a forged answer with a
// random ID matched a query waiting on it once in 65,536 tries per query
// in flight: in three runs 1, 5 and 7 of the 600 answers were poisoned,
// and 80 to 100 exchanges failed with a forged answer to another question.
func TestUDPSpoofedAnswersPoisonNothing(t *testing.T) {
	t.Parallel()
	if !inOwnNetns(t) {
		return
	}
	queries, forged := 600, 1000
	if raceEnabled || testing.Short() {
		forged = 100 // 60,000 datagrams instead of 600,000: the race detector slows the sends
	}
	const inFlight = 20
	lo, hi := ephemeralPorts(t)

	up := newSpoofedUpstream(t, forged, lo, hi)
	u := newTestUDP(t, up.addr.String())

	var mu sync.Mutex
	var poisoned, failed int
	var firstErr error
	var wg sync.WaitGroup
	next := make(chan int)
	for range inFlight {
		wg.Go(func() {
			for i := range next {
				q := query(fmt.Sprintf("q%d.spoof.example", i))
				r, err := exchangeMsg(ctxWithin(t, answerTimeout), u, q)
				mu.Lock()
				switch {
				case err != nil:
					failed++
					if firstErr == nil {
						firstErr = err
					}
				case len(r.Answer) != 1:
					failed++
				case r.Answer[0].(*dns.A).A.Equal(forgedIP):
					poisoned++
				}
				mu.Unlock()
			}
		})
	}
	for i := range queries {
		next <- i
	}
	close(next)
	wg.Wait()

	sent, ports := up.stop()
	t.Logf("%d queries from %d distinct source ports, %d forged answers sent: %d poisoned, %d failed",
		queries, ports, sent, poisoned, failed)
	if poisoned != 0 {
		t.Errorf("%d of %d answers poisoned by %d forged ones, want 0", poisoned, queries, sent)
	}
	if failed != 0 {
		t.Errorf("%d of %d exchanges failed (the first: %v), want 0", failed, queries, firstErr)
	}
}

// forgedIP is the address the spoofer's answers carry (TEST-NET-2).
var forgedIP = net.IPv4(198, 51, 100, 66).To4()

// spoofedUpstream is the upstream of the spoof test, whose spoofer shares
// its socket: the forged answers come from the upstream's address and
// port, as an off-path spoofer forges them.
type spoofedUpstream struct {
	pc     *net.UDPConn
	addr   netip.AddrPort
	forged int    // forged answers per query
	lo, hi uint16 // the ephemeral range the spoofer guesses in
	done   chan struct{}
	sent   int      // forged answers sent; read after done
	seen   []uint16 // the source ports of the queries answered so far
}

func newSpoofedUpstream(tb testing.TB, forged int, lo, hi uint16) *spoofedUpstream {
	tb.Helper()
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	s := &spoofedUpstream{pc: pc, addr: pc.LocalAddr().(*net.UDPAddr).AddrPort(), forged: forged, lo: lo, hi: hi, done: make(chan struct{})}
	go s.serve()
	tb.Cleanup(func() { s.stop() })
	return s
}

// serve answers each query, after the spoofer's forged answers to it,
// until the socket closes.
func (s *spoofedUpstream) serve() {
	defer close(s.done)
	buf := make([]byte, 1500)
	for {
		n, from, err := s.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		var q dns.Msg
		if q.Unpack(buf[:n]) != nil || q.Response || len(q.Question) != 1 {
			continue // the spoofer's own, sent to this port: no query
		}
		s.spoof(&q) // knows the question, not the port it came from
		r := new(dns.Msg).SetReply(&q)
		r.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)}}
		if b, err := r.Pack(); err == nil {
			_, _ = s.pc.WriteToUDPAddrPort(b, from)
		}
		s.seen = append(s.seen, from.Port())
	}
}

// spoof sends the forged answers to q's question: random IDs, half to the
// ports of the queries answered so far (the latest thousand), half to
// random ports of the ephemeral range.
func (s *spoofedUpstream) spoof(q *dns.Msg) {
	r := new(dns.Msg).SetReply(q)
	r.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 86400}, A: forgedIP}}
	b, err := r.Pack()
	if err != nil {
		return
	}
	recent := s.seen[max(0, len(s.seen)-1000):]
	for i := range s.forged {
		port := s.lo + uint16(rand.IntN(int(s.hi-s.lo)+1))
		if port == s.addr.Port() {
			continue
		}
		if i%2 == 0 && len(recent) > 0 {
			port = recent[rand.IntN(len(recent))]
		}
		binary.BigEndian.PutUint16(b, uint16(rand.Uint32()))
		if _, err := s.pc.WriteToUDPAddrPort(b, netip.AddrPortFrom(s.addr.Addr(), port)); err == nil {
			s.sent++
		}
	}
}

// stop closes the upstream, waits for it, and returns the forged answers
// sent and the distinct ports its queries came from.
func (s *spoofedUpstream) stop() (sent, ports int) {
	_ = s.pc.Close()
	<-s.done
	distinct := map[uint16]bool{}
	for _, p := range s.seen {
		distinct[p] = true
	}
	return s.sent, len(distinct)
}

// ephemeralPorts is the kernel's range of source ports
// (net.ipv4.ip_local_port_range), or the IANA range where it cannot be read.
func ephemeralPorts(tb testing.TB) (lo, hi uint16) {
	tb.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 49152, 65535
	}
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil || hi <= lo {
		tb.Fatalf("ip_local_port_range %q", b)
	}
	return lo, hi
}

// The source ports of 6,000 queries, 50 in flight at once, as the upstream
// sees them: spread over the kernel's ephemeral range (a collision entropy
// of at least 10 bits, about 15 on Linux's default range of 28,232 ports),
// and not in sequence (successive ports close together in fewer than 5 %
// of pairs, where a counter would have them all). Before the fix, the
// 6,000 queries came from two ports.
func TestUDPSourcePortsSpread(t *testing.T) {
	t.Parallel()
	const queries, inFlight = 6000, 50
	lo, hi := ephemeralPorts(t)
	if hi-lo < 2048 {
		t.Skipf("an ephemeral range of %d ports cannot show 10 bits", hi-lo+1)
	}
	up := newEchoUpstream(t)
	u := newTestUDP(t, up.addr)

	var wg sync.WaitGroup
	errs := make(chan error, queries)
	next := make(chan int)
	for range inFlight {
		wg.Go(func() {
			for i := range next {
				if _, err := exchangeMsg(ctxWithin(t, answerTimeout), u, query(fmt.Sprintf("q%d.ports.example", i))); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range queries {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ports := up.stop()

	count := map[uint16]int{}
	near := 0
	for i, p := range ports {
		count[p]++
		if i > 0 && absDiff(p, ports[i-1]) <= 16 {
			near++
		}
	}
	pairs := 0.0
	for _, c := range count {
		pairs += float64(c) * float64(c-1) / 2
	}
	n := float64(len(ports))
	h2 := math.Log2(n * (n - 1) / 2 / max(pairs, 1)) // collision entropy, estimated
	t.Logf("%d queries from %d distinct source ports in %d..%d; %.0f pairs share a port: a collision entropy of %.1f bits; %d successive pairs within 16 ports",
		len(ports), len(count), lo, hi, pairs, h2, near)
	if len(ports) != queries {
		t.Fatalf("the upstream saw %d queries, want %d", len(ports), queries)
	}
	if h2 < 10 {
		t.Errorf("source ports with a collision entropy of %.1f bits, want at least 10", h2)
	}
	if near > queries/20 {
		t.Errorf("%d of %d successive ports within 16 of each other, want under 5 %%", near, queries-1)
	}
}

func absDiff(a, b uint16) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

// An exchange on the poller allocates nothing: its socket is opened with
// bare system calls, its wait is pooled, its answer read into its buffer.
// (A net.UDPConn per exchange, the dialer's way, costs about a dozen.)
func TestUDPExchangeAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	if !havePoller {
		t.Skip("no poller on this platform")
	}
	up := newEchoUpstream(t) // allocates nothing either, once its list of ports has grown
	u := newTestUDP(t, up.addr)
	q := wireQuery(t, query("alloc.example"), 4096)
	ctx := t.Context()
	allocs := testing.AllocsPerRun(500, func() {
		a, err := u.Exchange(ctx, q, within(answerTimeout))
		if err != nil || a.Raw == nil {
			t.Fatalf("exchange: %v, raw %d bytes: want the answer's bytes", err, len(a.Raw))
		}
	})
	if allocs > 0 {
		t.Errorf("an exchange allocates %v objects, want 0", allocs)
	}
}

// echoUpstream answers each query with the query itself, QR set (no
// records), and records the source port of each.
type echoUpstream struct {
	pc    *net.UDPConn
	addr  string
	done  chan struct{}
	ports []uint16 // read after done
}

func newEchoUpstream(tb testing.TB) *echoUpstream {
	tb.Helper()
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	e := &echoUpstream{pc: pc, addr: pc.LocalAddr().String(), done: make(chan struct{}), ports: make([]uint16, 0, 8192)}
	go func() {
		defer close(e.done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if n < dnsmsg.HeaderLen || buf[2]&0x80 != 0 {
				continue // no query
			}
			e.ports = append(e.ports, from.Port())
			buf[2] |= 0x80
			_, _ = pc.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	tb.Cleanup(func() { e.stop() })
	return e
}

// stop closes the upstream, waits for it, and returns the source ports of
// the queries it answered, in order.
func (e *echoUpstream) stop() []uint16 {
	_ = e.pc.Close()
	<-e.done
	return e.ports
}
