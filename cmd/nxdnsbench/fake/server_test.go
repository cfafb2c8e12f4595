package fake

import (
	"context"
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

func exchange(tb testing.TB, s *Server, network string, timeout time.Duration) (*dns.Msg, error) {
	tb.Helper()
	c := &dns.Client{Net: network, Timeout: timeout}
	q := new(dns.Msg).SetQuestion("q1.bench.example.", dns.TypeA)
	r, _, err := c.ExchangeContext(context.Background(), q, s.Addr().String())
	return r, err
}

func TestServerModes(t *testing.T) {
	t.Parallel()
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			t.Parallel()
			s := startFake(t, Mode{})

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
