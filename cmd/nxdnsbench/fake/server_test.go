package fake

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// shortTimeout bounds a blackholed exchange: long enough for loopback on a
// busy machine, short enough to keep the test quick.
const shortTimeout = 100 * time.Millisecond

func startFake(tb testing.TB, mode Mode) *Server {
	tb.Helper()
	s, err := Start(Config{Addr: "127.0.0.1:0", Mode: mode, Sockets: 2})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// startTLSFake starts a fake serving DoT as well, with a certificate of a
// fresh CA for TLSName and 127.0.0.1, and returns a client configuration
// trusting that CA and verifying TLSName.
func startTLSFake(tb testing.TB, mode Mode) (*Server, *tls.Config) {
	tb.Helper()
	ca, err := NewCA(time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	conf, err := ca.ServerConfig(TLSName, "127.0.0.1")
	if err != nil {
		tb.Fatal(err)
	}
	s, err := Start(Config{Addr: "127.0.0.1:0", Mode: mode, Sockets: 2, TLS: conf})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s, &tls.Config{RootCAs: ca.Pool(), ServerName: TLSName, MinVersion: tls.VersionTLS12}
}

// dialTimeout bounds the connection an exchange sends its query on: a TLS
// handshake on a busy machine under the race detector.
const dialTimeout = 5 * time.Second

// exchange sends one query over network, "udp", "tcp" or "tcp-tls" (DoT,
// to TLSAddr, with client's configuration), on a connection of its own,
// and waits timeout for the answer. The handshake has dialTimeout: a slow
// one must not pass for a blackholed query.
func exchange(tb testing.TB, s *Server, network string, client *tls.Config, timeout time.Duration) (*dns.Msg, error) {
	tb.Helper()
	addr := s.Addr()
	if network == "tcp-tls" {
		addr = s.TLSAddr()
	}
	conn, err := (&dns.Client{Net: network, Timeout: dialTimeout, TLSConfig: client}).Dial(addr.String())
	if err != nil {
		tb.Fatalf("dialing %s %s: %v", network, addr, err)
	}
	defer conn.Close()
	c := &dns.Client{Net: network, Timeout: timeout}
	q := new(dns.Msg).SetQuestion("q1.bench.example.", dns.TypeA)
	r, _, err := c.ExchangeWithConnContext(context.Background(), q, conn)
	return r, err
}

func TestServerModes(t *testing.T) {
	t.Parallel()
	for _, network := range []string{"udp", "tcp", "tcp-tls"} {
		t.Run(network, func(t *testing.T) {
			t.Parallel()
			var s *Server
			var client *tls.Config
			if network == "tcp-tls" {
				s, client = startTLSFake(t, Mode{})
			} else {
				s = startFake(t, Mode{})
			}
			exchange := func(t *testing.T, s *Server, network string, timeout time.Duration) (*dns.Msg, error) {
				return exchange(t, s, network, client, timeout)
			}

			r, err := exchange(t, s, network, 5*time.Second)
			if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				t.Fatalf("answer mode: %v, %v", r, err)
			}

			s.SetMode(Mode{Kind: Refuse})
			r, err = exchange(t, s, network, 5*time.Second)
			if err != nil || r.Rcode != dns.RcodeRefused {
				t.Fatalf("refuse mode: %v, %v", r, err)
			}

			s.SetMode(Mode{Kind: Blackhole})
			r, err = exchange(t, s, network, shortTimeout)
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("blackhole mode: %v, %v; want a timeout", r, err)
			}

			const delay = 50 * time.Millisecond
			s.SetMode(Mode{Kind: Delay, Delay: delay})
			start := time.Now()
			r, err = exchange(t, s, network, 5*time.Second)
			if err != nil || len(r.Answer) != 1 {
				t.Fatalf("delay mode: %v, %v", r, err)
			}
			if took := time.Since(start); took < delay {
				t.Fatalf("delayed answer after %v, before the %v delay", took, delay)
			}

			// The delayed answer may still be being counted: the client can
			// read it before writeDelayed returns from the write.
			st := s.Stats()
			if st.Queries != 4 || st.Answers < 2 || st.Dropped != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"answer", "blackhole", "refuse", "delay=3s", "delay=100ms"} {
		m, err := ParseMode(s)
		if err != nil || m.String() != s {
			t.Errorf("ParseMode(%q) = %v, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "delay", "delay=-1s", "delay=x", "drop"} {
		if _, err := ParseMode(s); err == nil {
			t.Errorf("ParseMode(%q) accepted", s)
		}
	}
}
