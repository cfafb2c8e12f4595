package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// stallName is the question the stalling handler holds until released:
// an upstream that never answers.
const stallName = "stall.test."

// stalling is echo, but for queries for stallName, which it holds until
// release is closed or ctx ends. Each held query is announced on entered
// (when it has room), and held counts those being held.
type stalling struct {
	release chan struct{}
	entered chan struct{}
	held    atomic.Int64
	most    atomic.Int64 // the most held at once
}

func newStalling(room int) *stalling {
	return &stalling{release: make(chan struct{}), entered: make(chan struct{}, room)}
}

func (h *stalling) ServeDNS(ctx context.Context, req *Request) []byte {
	var q dns.Msg
	if err := q.Unpack(req.Raw); err == nil && len(q.Question) == 1 && q.Question[0].Name == stallName {
		n := h.held.Add(1)
		for m := h.most.Load(); n > m && !h.most.CompareAndSwap(m, n); m = h.most.Load() {
		}
		select {
		case h.entered <- struct{}{}:
		default:
		}
		select {
		case <-h.release:
		case <-ctx.Done():
		}
		h.held.Add(-1)
	}
	return echo(ctx, req)
}

// waitEntered waits until n held queries have been announced.
func (h *stalling) waitEntered(tb testing.TB, n int) {
	tb.Helper()
	timeout := time.After(ioTimeout)
	for i := range n {
		select {
		case <-h.entered:
		case <-timeout:
			tb.Fatalf("%d of %d stalled queries reached the handler", i, n)
		}
	}
}

// dialFrom dials addr over network from the loopback address local
// (127.0.0.2, 127.0.0.3, …: every one of 127/8 is this host's), so that
// one test can play several clients.
func dialFrom(network, local, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: ioTimeout}
	ip := netip.MustParseAddr(local)
	switch network {
	case "udp":
		d.LocalAddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 0))
	default:
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, 0))
	}
	return d.Dial(network, addr)
}

// pipeline writes the queries for name with IDs 0..n-1 on c, one write.
func pipeline(tb testing.TB, c net.Conn, name string, n int) {
	tb.Helper()
	var b []byte
	for id := range n {
		q := pack(tb, newQuery(uint16(id), name))
		b = append(b, byte(len(q)>>8), byte(len(q)))
		b = append(b, q...)
	}
	go func() { _, _ = c.Write(b) }() // more than the socket buffers hold: the server reads at its pace
}

// A TCP connection has at most MaxQueriesPerConnection queries served at
// once: one pipelining 300 queries to a stalling upstream gets 100 into the
// handler, and the others wait in its socket, to be answered, not refused,
// as the first ones are. Before the fix all 300 were in the handler at
// once.
func TestServerConnectionQueryCap(t *testing.T) {
	t.Parallel()
	const queries = 300
	h := newStalling(queries)
	s := &Server{Handler: h}
	_, tcpAddr := startServer(t, s)
	unblock := sync.OnceFunc(func() { close(h.release) })
	t.Cleanup(unblock)

	c := dialDNS(t, "tcp", tcpAddr)
	pipeline(t, c.Conn, stallName, queries)
	h.waitEntered(t, DefaultMaxQueriesPerConnection)
	unblock()
	c.SetReadDeadline(time.Now().Add(ioTimeout))
	for i := range queries {
		r, err := c.ReadMsg()
		if err != nil {
			t.Fatalf("after %d answers: %v", i, err)
		}
		if r.Rcode != dns.RcodeSuccess {
			t.Fatalf("answer %d: %s, want every query answered", r.Id, dns.RcodeToString[r.Rcode])
		}
	}
	if most := h.most.Load(); most != DefaultMaxQueriesPerConnection {
		t.Errorf("%d queries of one connection in the handler at once, want %d", most, DefaultMaxQueriesPerConnection)
	}
}

// One client address has at most MaxClientQueries queries served at once,
// UDP and TCP together; past it its queries are refused, while another
// client's are served.
func TestServerClientQueryShare(t *testing.T) {
	t.Parallel()
	const share, flood = 8, 20
	h := newStalling(flood)
	var overloads atomic.Int64
	s := &Server{Handler: h, MaxConcurrentQueries: 64, MaxClientQueries: share, OnOverload: func([]byte, string, netip.AddrPort) { overloads.Add(1) }}
	udpAddr, tcpAddr := startServer(t, s)
	unblock := sync.OnceFunc(func() { close(h.release) })
	t.Cleanup(unblock)

	nc, err := dialFrom("udp", "127.0.0.2", udpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	flooder := &dns.Conn{Conn: nc}
	for id := range uint16(flood) {
		if err := flooder.WriteMsg(newQuery(id, stallName)); err != nil {
			t.Fatal(err)
		}
	}
	h.waitEntered(t, share)
	flooder.SetReadDeadline(time.Now().Add(ioTimeout))
	for i := range flood - share {
		if r, err := flooder.ReadMsg(); err != nil || r.Rcode != dns.RcodeRefused {
			t.Fatalf("flood answer %d: %v, %v; want REFUSED past the share", i, r, err)
		}
	}
	// Its TCP queries count in the same share.
	tc, err := dialFrom("tcp", "127.0.0.2", tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	if r := exchangeOn(t, &dns.Conn{Conn: tc}, newQuery(100, "other.test.")); r.Rcode != dns.RcodeRefused {
		t.Errorf("the flooder's TCP query: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	tc.Close()
	// Another client is served.
	for _, network := range []string{"udp", "tcp"} {
		nc, err := dialFrom(network, "127.0.0.3", map[string]string{"udp": udpAddr, "tcp": tcpAddr}[network])
		if err != nil {
			t.Fatal(err)
		}
		q := newQuery(200, "other.test.")
		r := exchangeOn(t, &dns.Conn{Conn: nc}, q)
		checkEcho(t, r, q, network, nc.LocalAddr().String())
		nc.Close()
	}
	if got := overloads.Load(); got != flood-share+1 {
		t.Errorf("OnOverload called %d times, want %d", got, flood-share+1)
	}
}

// One client address has at most MaxClientTCPConnections connections
// open; past it its connections are closed at once, while another
// client's are served. Every count goes when its connections do.
func TestServerClientTCPShare(t *testing.T) {
	t.Parallel()
	const share = 2
	events := make(chan bool, 8)
	s := &Server{
		Handler:                 HandlerFunc(echo),
		MaxTCPConnections:       8,
		MaxClientTCPConnections: share,
		accepted: func(ip netip.Addr, taken bool) {
			if ip == netip.MustParseAddr("127.0.0.2") {
				events <- taken
			}
		},
	}
	_, tcpAddr := startServer(t, s)

	var conns []net.Conn
	for range share + 1 {
		c, err := dialFrom("tcp", "127.0.0.2", tcpAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	taken := 0
	for range share + 1 {
		if <-events {
			taken++
		}
	}
	if taken != share {
		t.Fatalf("%d connections of one address taken, want %d", taken, share)
	}
	// The one closed at once reads EOF; the others are served.
	closed := 0
	for i, c := range conns {
		q := newQuery(uint16(i), "example.org.")
		dc := &dns.Conn{Conn: c}
		c.SetDeadline(time.Now().Add(ioTimeout))
		if err := dc.WriteMsg(q); err != nil {
			closed++
			continue
		}
		if _, err := dc.ReadMsg(); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("connection %d: %v", i, err)
			}
			closed++
		}
	}
	if closed != 1 {
		t.Errorf("%d connections closed, want 1", closed)
	}
	other, err := dialFrom("tcp", "127.0.0.3", tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	q := newQuery(9, "example.org.")
	checkEcho(t, exchangeOn(t, &dns.Conn{Conn: other}, q), q, "tcp", other.LocalAddr().String())
	other.Close()
	for _, c := range conns {
		c.Close()
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.adm.mu.Lock()
	left := len(s.adm.connsPerIP)
	s.adm.mu.Unlock()
	if left != 0 {
		t.Errorf("%d client addresses still counted after every connection closed", left)
	}
}

// The fairness test of issue 16, at the server's defaults: while one
// address pipelines 5,000 queries on one TCP connection to a stalling
// upstream, and 1,100 reconnecting idle TCP clients come from another,
// a third client's UDP and TCP queries (a fresh connection for each, as
// dig +tcp makes) are answered. Before the fix the pipelined queries took
// every permit (REFUSED for everyone else) and the idle clients every
// connection (the third client's closed at once): 0 % answered.
//
// Not parallel: it opens some 1,400 sockets and keeps both cores busy.
func TestServerFairShares(t *testing.T) {
	const (
		pipelined     = 5000
		idlers        = 1100
		asks          = 200 // of each protocol
		victimWorkers = 8
		pipeliner     = "127.0.0.2"
		idler         = "127.0.0.3"
		victim        = "127.0.0.4"
	)
	shareTCP := ClientShare(DefaultMaxTCPConnections)
	var taken, turned atomic.Int64
	flooding := make(chan struct{}) // closed once the idlers hold their share and are being turned away
	signal := sync.OnceFunc(func() { close(flooding) })
	h := newStalling(pipelined)
	s := &Server{
		Handler: h,
		accepted: func(ip netip.Addr, ok bool) {
			if ip != netip.MustParseAddr(idler) {
				return
			}
			if ok {
				taken.Add(1)
			} else {
				turned.Add(1)
			}
			if taken.Load() >= int64(shareTCP) && turned.Load() >= idlers {
				signal()
			}
		},
	}
	udpAddr, tcpAddr := startServer(t, s)
	unblock := sync.OnceFunc(func() { close(h.release) })
	t.Cleanup(unblock)

	// One connection pipelines 5,000 queries that stall.
	pc, err := dialFrom("tcp", pipeliner, tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	pipeline(t, pc, stallName, pipelined)
	h.waitEntered(t, DefaultMaxQueriesPerConnection)

	// 1,100 idle clients of one address, each reconnecting as soon as
	// the server closes its connection.
	stop := make(chan struct{})
	var idle sync.WaitGroup
	var live sync.Map // net.Conn: the idlers' open connections, closed at the end
	for range idlers {
		idle.Go(func() {
			var b [1]byte
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := dialFrom("tcp", idler, tcpAddr)
				if err != nil {
					continue // the listen queue was full; try again
				}
				live.Store(c, nil)
				_, _ = c.Read(b[:]) // idle until the server closes it (or the test ends)
				live.Delete(c)
				c.Close()
			}
		})
	}
	defer func() {
		close(stop)
		live.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
		idle.Wait()
	}()
	select {
	case <-flooding:
	case <-time.After(10 * ioTimeout):
		t.Fatalf("the idle flood did not fill its share: %d taken, %d turned away", taken.Load(), turned.Load())
	}

	// The victim asks from a few goroutines at once: on this machine the
	// flood it shares the cores with makes each query take a while.
	var answered [2]atomic.Int64 // udp, tcp
	var victims sync.WaitGroup
	for w := range victimWorkers {
		victims.Go(func() {
			for i := w; i < asks; i += victimWorkers {
				for p, network := range []string{"udp", "tcp"} {
					if askOnce(t, network, victim, map[string]string{"udp": udpAddr, "tcp": tcpAddr}[network], uint16(i)) {
						answered[p].Add(1)
					}
				}
			}
		})
	}
	victims.Wait()
	udpAnswered, tcpAnswered := int(answered[0].Load()), int(answered[1].Load())
	held := h.held.Load()
	t.Logf("while %d pipelined queries were held (%d in the handler) and %d idle connections turned away (%d taken): answered %d of %d UDP, %d of %d TCP (%.1f %%)",
		pipelined, held, turned.Load(), taken.Load(), udpAnswered, asks, tcpAnswered, asks,
		100*float64(udpAnswered+tcpAnswered)/float64(2*asks))
	for network, n := range map[string]int{"udp": udpAnswered, "tcp": tcpAnswered} {
		if n < asks*99/100 {
			t.Errorf("%s: %d of %d queries answered, want at least 99 %%", network, n, asks)
		}
	}
	if held != DefaultMaxQueriesPerConnection {
		t.Errorf("%d pipelined queries in the handler, want %d", held, DefaultMaxQueriesPerConnection)
	}
	s.adm.mu.Lock()
	idlersHeld := s.adm.connsPerIP[netip.MustParseAddr(idler)]
	s.adm.mu.Unlock()
	if idlersHeld > shareTCP {
		t.Errorf("%d connections of the idle address held, want at most %d", idlersHeld, shareTCP)
	}
}

// askOnce asks addr over network, from the loopback address local, one
// question on a fresh socket (as dig does), and reports whether it was
// answered NOERROR; why not is logged.
func askOnce(tb testing.TB, network, local, addr string, id uint16) bool {
	q := newQuery(id, "victim.test.")
	c, err := dialFrom(network, local, addr)
	if err != nil {
		tb.Logf("%s query %d: dialing: %v", network, id, err)
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	dc := &dns.Conn{Conn: c}
	if err := dc.WriteMsg(q); err != nil {
		tb.Logf("%s query %d: writing: %v", network, id, err)
		return false
	}
	r, err := dc.ReadMsg()
	switch {
	case err != nil:
		tb.Logf("%s query %d: %v", network, id, err)
		return false
	case r.Id != q.Id || r.Rcode != dns.RcodeSuccess:
		tb.Logf("%s query %d: %s", network, id, dns.RcodeToString[r.Rcode])
		return false
	}
	return true
}

// Servers that share an Admission share its limits: with
// MaxConcurrentQueries 1 across two servers, a query held on one leaves
// the other none (REFUSED), and once it is answered the other serves again.
func TestServersShareAdmission(t *testing.T) {
	t.Parallel()
	adm := NewAdmission()
	h := &fastEcho{hold: make(chan struct{})}
	first, _ := startServer(t, &Server{Handler: h, MaxConcurrentQueries: 1, Admission: adm})
	second, _ := startServer(t, &Server{Handler: h, MaxConcurrentQueries: 1, Admission: adm})
	c := &dns.Client{Net: "udp", Timeout: ioTimeout}
	held := make(chan error, 1)
	go func() {
		_, _, err := c.Exchange(queryFor("hold.example."), first)
		held <- err
	}()
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatal("the first server never held the shared permit")
		}
		r, _, err := c.Exchange(queryFor("other.example."), second)
		if err != nil {
			t.Fatal(err)
		}
		if r.Rcode == dns.RcodeRefused {
			break
		}
	}
	close(h.hold)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	// The permit comes back just after the answer is written: ask until
	// the other server serves again.
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatal("the shared permit never came back")
		}
		r, _, err := c.Exchange(queryFor("other.example."), second)
		if err != nil {
			t.Fatal(err)
		}
		if r.Rcode == dns.RcodeSuccess {
			break
		}
	}
}

// A client is an address: another port of it shares its count, and so does
// the same address with another zone; but the addresses of one IPv6 /64
// are clients of their own (a /64 is a whole LAN). This pins what the
// comment on clientCounts says: before, it claimed a prefix was one
// client while the code counted each address.
func TestClientCountsPerIPv6Address(t *testing.T) {
	t.Parallel()
	c := newClientCounts()
	a := netip.MustParseAddr("fd00:1:2:3::1")
	if c.count(a) != c.count(netip.AddrPortFrom(a, 53).Addr()) || c.count(netip.MustParseAddr("fe80::1%eth0")) != c.count(netip.MustParseAddr("fe80::1%eth1")) {
		t.Error("one address counted in two places")
	}
	// Eight addresses of one /64 in a single count happens by chance with
	// odds of 1 in 16,384^7: never. Counting by /64 makes it certain.
	counts := map[*atomic.Int32]bool{}
	for i := range 8 {
		b := a.As16()
		b[15] = byte(i + 1)
		b[9] = byte(i * 37)
		counts[c.count(netip.AddrFrom16(b))] = true
	}
	if len(counts) < 2 {
		t.Error("eight addresses of one IPv6 /64 share one count: the prefix is counted as one client")
	}
}
