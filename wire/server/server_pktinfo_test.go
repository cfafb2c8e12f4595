//go:build linux

package server

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// askFrom sends a query for name from an unconnected socket on client to
// server and returns the address the answer came from.
func askFrom(t *testing.T, client, server netip.AddrPort, name string) netip.AddrPort {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(client))
	if err != nil {
		t.Skipf("prerequisite missing: binding the client address %s: %v", client, err)
	}
	defer c.Close()
	q := queryFor(name)
	b, _ := q.Pack()
	if _, err := c.WriteToUDPAddrPort(b, server); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	if err := c.SetReadDeadline(time.Now().Add(ioTimeout)); err != nil {
		t.Fatal(err)
	}
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("%s: no answer from %s: %v", name, server, err)
	}
	var r dns.Msg
	if err := r.Unpack(buf[:n]); err != nil || r.Id != q.Id {
		t.Fatalf("%s: answer %v (%v)", name, r, err)
	}
	return from
}

// A listener bound to a wildcard address answers from the address the
// client asked, on the fast path and from a worker: a client that asked
// 127.0.0.2 gets its answer from 127.0.0.2, not from the kernel's choice
// (127.0.0.1, the route back to the client). Without IP_PKTINFO the
// answers came from 127.0.0.1 and this test failed. The IPv6 case asks ::1
// of a [::] listener, where the machine has IPv6.
func TestServerAnswersFromTheAddressAsked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		listen, client, asked string
	}{
		{"0.0.0.0:0", "127.0.0.1:0", "127.0.0.2"},
		{"[::]:0", "[::1]:0", "::1"},
	} {
		h := &fastEcho{}
		s := &Server{Handler: h, Listen: []string{tc.listen}}
		if err := s.Start(); err != nil {
			t.Logf("%s: %v (no such family here)", tc.listen, err)
			continue
		}
		t.Cleanup(func() { _ = s.Shutdown(t.Context()) })
		udp, _ := s.Addrs()
		port := udp[0].(*net.UDPAddr).AddrPort().Port()
		server := netip.AddrPortFrom(netip.MustParseAddr(tc.asked), port)
		for _, name := range []string{"a.fast.", "slow.example."} { // the fast path, a worker
			if from := askFrom(t, netip.MustParseAddrPort(tc.client), server, name); from.Addr() != server.Addr() {
				t.Errorf("%s asked %s: the answer came from %s", tc.listen, server, from)
			}
		}
		if h.fast.Load() != 1 || h.slow.Load() != 1 {
			t.Errorf("%s: fast %d, worker %d; want one each", tc.listen, h.fast.Load(), h.slow.Load())
		}
	}
}

// 0.0.0.0 binds IPv4 only and [::] IPv6 only: both can be listened on at
// once on the same port.
func TestServerWildcardsPerFamily(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp4", "0.0.0.0:0") // a port free for TCP, most likely for UDP too
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	first := &Server{Handler: HandlerFunc(echo), Listen: []string{netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(port)).String()}}
	if err := first.Start(); err != nil {
		t.Skipf("port %d taken meanwhile: %v", port, err)
	}
	t.Cleanup(func() { _ = first.Shutdown(t.Context()) })
	uport := port
	second := &Server{Handler: HandlerFunc(echo), Listen: []string{netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(uport)).String()}}
	if err := second.Start(); err != nil {
		if _, err6 := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback}); err6 != nil {
			t.Skipf("prerequisite missing: IPv6 here: %v", err6)
		}
		t.Fatalf("[::] on 0.0.0.0's port %d: %v", uport, err)
	}
	t.Cleanup(func() { _ = second.Shutdown(t.Context()) })
}

// Queries sent in a burst to a wildcard listener's several addresses are
// answered each from the address it asked, also when the reader takes
// them in one batch and sends their answers with one sendmmsg: each
// answer carries a source of its own.
func TestServerAnswersFromTheAddressAskedInBursts(t *testing.T) {
	t.Parallel()
	udp, _ := startServer(t, &Server{Handler: &fastEcho{}, Listen: []string{"0.0.0.0:0"}})
	port := netip.MustParseAddrPort(udp).Port()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	asked := map[uint16]netip.Addr{}
	for i := range 90 {
		to := netip.AddrFrom4([4]byte{127, 0, 0, byte(1 + i%3)})
		q := queryFor("burst.fast.")
		q.Id = uint16(i)
		b, _ := q.Pack()
		if _, err := c.WriteToUDPAddrPort(b, netip.AddrPortFrom(to, port)); err != nil {
			t.Fatal(err)
		}
		asked[q.Id] = to
	}
	buf := make([]byte, 1500)
	if err := c.SetReadDeadline(time.Now().Add(ioTimeout)); err != nil {
		t.Fatal(err)
	}
	for range 90 {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("%d answers missing: %v", len(asked), err)
		}
		var r dns.Msg
		if err := r.Unpack(buf[:n]); err != nil {
			t.Fatal(err)
		}
		want, ok := asked[r.Id]
		if !ok {
			t.Fatalf("answer %d twice, or to no query", r.Id)
		}
		if from.Addr() != want {
			t.Errorf("query %d asked %s: the answer came from %s", r.Id, want, from.Addr())
		}
		delete(asked, r.Id)
	}
}
