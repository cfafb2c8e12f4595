package server

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// freePort returns a port that was free on both families of wildcard
// address for TCP a moment ago, most likely for UDP too.
func freePort(tb testing.TB) uint16 {
	tb.Helper()
	l, err := net.Listen("tcp6", "[::]:0")
	if err != nil {
		tb.Skipf("no IPv6 here: %v", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return uint16(port)
}

// One Server serves an IPv4 and an IPv6 address on one port, each with
// several SO_REUSEPORT sockets as the daemon binds them (one per core):
// 0.0.0.0 binds IPv4 only and [::] IPv6 only (IPV6_V6ONLY), so listing
// both, as the README's example does, serves both families. Queries to
// 127.0.0.1 and ::1 are answered over UDP and TCP. Mutation: binding "udp"
// instead of "udp4"/"udp6" makes Start fail with "address already in use".
func TestServerServesBothFamiliesOnOnePort(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]netip.Addr{
		{netip.IPv4Unspecified(), netip.IPv6Unspecified()},
		{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()},
	} {
		port := freePort(t)
		v4, v6 := netip.AddrPortFrom(pair[0], port), netip.AddrPortFrom(pair[1], port)
		s := &Server{Handler: HandlerFunc(echo), UDPSockets: 2, Listen: []string{v4.String(), v6.String()}}
		if err := s.Start(); err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				t.Skipf("port %d taken meanwhile: %v", port, err)
			}
			t.Fatalf("listen %s and %s: %v", v4, v6, err)
		}
		t.Cleanup(func() { _ = s.Shutdown(t.Context()) })
		for _, to := range []string{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port).String(), netip.AddrPortFrom(netip.IPv6Loopback(), port).String()} {
			for _, proto := range []string{"udp", "tcp"} {
				q := newQuery(7, "both.example.")
				if r := exchangeOn(t, dialDNS(t, proto, to), q); r.Id != q.Id || len(r.Answer) != 1 {
					t.Errorf("listening on %s and %s: %s query to %s: %v", v4, v6, proto, to, r)
				}
			}
		}
	}
}

// Each address is logged once per protocol, however many UDP sockets it
// has (it was logged once per socket: "serving udp" twice on two cores).
func TestServerLogsEachAddressOnce(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	s := &Server{Handler: HandlerFunc(echo), UDPSockets: 3, Logger: zap.New(core),
		Listen: []string{"127.0.0.1:0", "127.0.0.2:0"}}
	startServer(t, s)
	udp, tcp := s.Addrs()
	got := map[string]int{}
	for _, e := range logs.FilterMessage("serving").All() {
		got[e.ContextMap()["proto"].(string)+" "+e.ContextMap()["addr"].(string)]++
	}
	want := map[string]int{}
	for _, a := range udp {
		want["udp "+a.String()]++
	}
	for _, a := range tcp {
		want["tcp "+a.String()]++
	}
	if len(got) != len(want) {
		t.Errorf("serving lines %v, want one each of %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%q logged %d times, want %d", k, got[k], n)
		}
	}
}

// An address another socket holds fails Start with an error that names
// the address, the way to see who holds it and docs/install.md's section,
// and that still matches EADDRINUSE.
func TestServerAddressTaken(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"udp", "tcp"} {
		var taken netip.AddrPort
		if proto == "udp" {
			pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close()
			taken = pc.LocalAddr().(*net.UDPAddr).AddrPort()
		} else {
			l, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			taken = l.Addr().(*net.TCPAddr).AddrPort()
		}
		s := &Server{Handler: HandlerFunc(echo), Listen: []string{taken.String()}}
		err := s.Start()
		if err == nil {
			_ = s.Shutdown(t.Context())
			if proto == "tcp" {
				continue // the port was free for UDP: nothing to learn
			}
			t.Fatalf("Start on %s, taken over %s, succeeded", taken, proto)
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("%s: %v, want EADDRINUSE", proto, err)
		}
		msg := err.Error()
		for _, want := range []string{"listening on " + proto + " " + taken.String(), "the address is taken",
			"ss -lntup 'sport = :", `"` + PortTakenSection + `" in docs/install.md`} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: error %q does not say %q", proto, msg, want)
			}
		}
		if strings.Contains(msg, "systemd-resolved") {
			t.Errorf("%s: error %q names port 53's holders for port %d", proto, msg, taken.Port())
		}
	}
}

// On port 53 the error names the programs that usually hold it.
func TestBindErrorPort53(t *testing.T) {
	t.Parallel()
	ap := netip.MustParseAddrPort("0.0.0.0:53")
	inUse := &net.OpError{Op: "listen", Net: "udp4", Err: &net.AddrError{}}
	if err := bindError("udp", ap, inUse); strings.Contains(err.Error(), "taken") {
		t.Errorf("another error is reported as a taken address: %v", err)
	}
	err := bindError("udp", ap, syscall.EADDRINUSE)
	for _, want := range []string{"udp 0.0.0.0:53", "systemd-resolved, dnsmasq or pihole-FTL", "sport = :53"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}
