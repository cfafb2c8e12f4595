package bootstrap

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/wire/transport"
	"github.com/nxdnsd/nxdnsd/wire/wiretest"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// A DoT upstream without ip is found through a plain-DNS bootstrap: the
// bootstrap answers dot.test with 127.0.0.1, the DoT fake there answers
// the query, and the host is looked up once (one A and one AAAA question)
// however many connections are dialled within its TTL.
func TestDoTUpstreamFoundThroughBootstrap(t *testing.T) {
	t.Parallel()
	boot, src := newBootstrap(t, records(300, nil))
	r := newResolver(t, src)
	up := newUpstream(t, "tls", wiretest.Answer())
	const conns = 3
	for range conns { // a transport each: a connection each
		if err := exchange(t, up.transport(t, transport.WithResolver(r))); err != nil {
			t.Fatalf("Exchange: %v", err)
		}
	}
	if n := up.conns(); n != conns {
		t.Errorf("the DoT fake accepted %d connections, want %d", n, conns)
	}
	if n := boot.UDPQueries() + boot.TCPQueries(); n != 2 {
		t.Errorf("the bootstrap was asked %d questions for %d dials, want 2 (A and AAAA, once)", n, conns)
	}
}

// With upstream.bootstrap empty the sources are the upstreams that have an
// ip, over their own transports: a DoT upstream with ip finds the host of
// a DoH upstream without one.
func TestUpstreamWithIPFindsAnotherUpstreamsHost(t *testing.T) {
	t.Parallel()
	ca := wiretest.NewCA(t)
	pinnedSrv := wiretest.NewDoTServer(t, ca.Certificate(t, wiretest.TLSName), records(300, nil))
	a, err := transport.ParseAddress(pinnedSrv.Upstream())
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := transport.NewTransport(a, transport.WithDialIP(loopback), transport.WithRootCAs(ca.Pool()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pinned.Close() })

	r := newResolver(t, Source{Name: "pinned", Exchanger: pinned})
	up := newUpstream(t, "https", wiretest.Answer())
	tr := up.transport(t, transport.WithResolver(r))
	for range 3 {
		if err := exchange(t, tr); err != nil {
			t.Fatalf("Exchange: %v", err)
		}
	}
	if n := pinnedSrv.Queries(); n != 2 {
		t.Errorf("the upstream with ip was asked %d questions, want 2 (A and AAAA, once)", n)
	}
}

// Lookups of one host at once share one: the bootstrap hears one A and one
// AAAA question.
func TestConcurrentLookupsShareOne(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	boot, src := newBootstrap(t, wiretest.Gate(release, records(300, nil)))
	r := newResolver(t, src)
	const callers = 10
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), lookupTimeout)
			defer cancel()
			res, err := r.Resolve(ctx, host)
			if err == nil && (len(res.Addrs) != 1 || res.Addrs[0] != loopback) {
				err = errors.New("wrong addresses")
			}
			errs <- err
		})
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := boot.UDPQueries() + boot.TCPQueries(); n != 2 {
		t.Errorf("%d lookups at once asked the bootstrap %d questions, want 2", callers, n)
	}
}

// Addresses are kept for the answer's TTL, within MinTTL..MaxTTL.
func TestAddressesKeptForTheirTTLClamped(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ttl  uint32
		want time.Duration
	}{
		{300, 300 * time.Second},
		{0, MinTTL},
		{1, MinTTL},
		{10 * 86400, MaxTTL},
	} {
		_, src := newBootstrap(t, records(c.ttl, nil))
		r := newResolver(t, src)
		clk := newClock()
		r.now = clk.Now
		res, err := r.Resolve(t.Context(), host)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Until.Sub(clk.Now()); got != c.want {
			t.Errorf("TTL %d: kept for %v, want %v", c.ttl, got, c.want)
		}
	}
}

// Due addresses are served at once while a refresh runs in the
// background; when refreshes fail the last good addresses stay in use,
// and a failed refresh is not repeated within RetryAfter.
func TestDueAddressesServedWhileRefreshed(t *testing.T) {
	t.Parallel()
	var refuse atomic.Bool
	boot, src := newBootstrap(t, records(300, &refuse))
	r := newResolver(t, src)
	clk := newClock()
	r.now = clk.Now
	asked := func() int64 { return boot.UDPQueries() + boot.TCPQueries() }
	resolve := func(when string) {
		t.Helper()
		res, err := r.Resolve(t.Context(), host)
		if err != nil || len(res.Addrs) != 1 || res.Addrs[0] != loopback {
			t.Fatalf("%s: Resolve = %v, %v; want 127.0.0.1", when, res.Addrs, err)
		}
	}

	resolve("first")
	clk.Add(299 * time.Second)
	resolve("within the TTL")
	if n := asked(); n != 2 {
		t.Fatalf("within the TTL the bootstrap was asked %d questions, want 2", n)
	}

	clk.Add(time.Second)
	resolve("due")
	settled(r, host)
	if n := asked(); n != 4 {
		t.Errorf("after the TTL the bootstrap was asked %d questions, want 4 (one refresh)", n)
	}

	refuse.Store(true)
	clk.Add(300 * time.Second)
	resolve("due, the bootstrap refusing")
	settled(r, host)
	resolve("after a failed refresh")
	clk.Add(RetryAfter - time.Second)
	resolve("within RetryAfter")
	if n := asked(); n != 6 {
		t.Errorf("a failed refresh and RetryAfter later the bootstrap was asked %d questions, want 6", n)
	}
	clk.Add(time.Second)
	resolve("after RetryAfter")
	settled(r, host)
	if n := asked(); n != 8 {
		t.Errorf("after RetryAfter the bootstrap was asked %d questions, want 8 (a second refresh)", n)
	}
}

// A bootstrap that refuses or stalls makes the upstream's attempt a local
// error: the pool records nothing against the upstream — however many
// queries fail — fails over to the next upstream, and the upstream is
// never dialled. Counted as the upstream's fault (a bootstrap's REFUSED
// classified as peer_fault, or the stall left to run into the attempt's
// expiry), Failures would count every query and the upstream would go
// into backoff after failure_threshold of them.
func TestFailedBootstrapRecordsNothingAgainstTheUpstream(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		h    wiretest.Handler
	}{
		{"refuses", wiretest.Rcode(dns.RcodeRefused)},
		{"stalls", wiretest.Stall},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, src := newBootstrap(t, c.h)
			r := newResolver(t, src)
			up := newUpstream(t, "tls", wiretest.Answer())
			second := wiretest.NewServer(t, wiretest.Answer())
			secondAddr, err := transport.ParseAddress("udp://" + second.Addr)
			if err != nil {
				t.Fatal(err)
			}
			udp, err := transport.NewTransport(secondAddr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = udp.Close() })

			const threshold = 2
			p, err := actors.NewPool(actors.Policy{
				AttemptTimeout: 200 * time.Millisecond, // the stalled lookup is cut off half-way
				TotalTimeout:   lookupTimeout,
				Health:         actors.HealthPolicy{FailureThreshold: threshold, Backoff: time.Minute, BackoffMax: time.Minute},
			}, []actors.Spec{
				{Name: "dot", Address: up.address, Slots: 4, Transport: up.transport(t, transport.WithResolver(r))},
				{Name: "second", Address: "udp://" + second.Addr, Slots: 4, Transport: udp},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()

			for i := range threshold + 2 {
				q, err := transport.NewQuery(wiretest.Query("example.com", dns.TypeA))
				if err != nil {
					t.Fatal(err)
				}
				res := p.Exchange(t.Context(), q, time.Now(), nil)
				if res.Err != nil {
					t.Fatalf("query %d: %v, want the second upstream's answer", i, res.Err)
				}
				if len(res.Attempts) == 0 || res.Attempts[0].Upstream != "dot" || res.Attempts[0].Outcome != actors.OutcomeLocalError {
					t.Fatalf("query %d: attempts %+v, want the first a local error of dot", i, res.Attempts)
				}
				if !errors.Is(res.Attempts[0].Err, transport.ErrBootstrap) {
					t.Errorf("query %d: dot's error %v, want ErrBootstrap", i, res.Attempts[0].Err)
				}
				if res.Upstream != "second" {
					t.Errorf("query %d: attributed to %q, want second", i, res.Upstream)
				}
			}
			p.Sync()
			st := p.Status()[0]
			if st.Failures != 0 || st.ConsecutiveFailures != 0 || st.InBackoff {
				t.Errorf("dot: failures %d, consecutive %d, in backoff %v; want nothing recorded", st.Failures, st.ConsecutiveFailures, st.InBackoff)
			}
			if n := up.conns(); n != 0 {
				t.Errorf("the DoT fake accepted %d connections, want 0", n)
			}
		})
	}
}

// With nothing to ask, a lookup fails at once, and so does the exchange:
// ErrBootstrap, nothing dialled — never the system resolver.
func TestNoSources(t *testing.T) {
	t.Parallel()
	r := newResolver(t)
	if _, err := r.Resolve(t.Context(), host); !errors.Is(err, errNoSources) {
		t.Errorf("Resolve = %v, want %v", err, errNoSources)
	}
	up := newUpstream(t, "tls", wiretest.Answer())
	if err := exchange(t, up.transport(t, transport.WithResolver(r))); !errors.Is(err, transport.ErrBootstrap) {
		t.Errorf("Exchange = %v, want ErrBootstrap", err)
	}
	if n := up.conns(); n != 0 {
		t.Errorf("the DoT fake accepted %d connections, want 0", n)
	}
}

// Use replaces the sources, and forgets a failure, so that a reload that
// fixes upstream.bootstrap takes effect at once.
func TestUseForgetsFailures(t *testing.T) {
	t.Parallel()
	_, bad := newBootstrap(t, wiretest.Rcode(dns.RcodeRefused))
	_, good := newBootstrap(t, records(300, nil))
	r := newResolver(t, bad)
	if _, err := r.Resolve(t.Context(), host); err == nil {
		t.Fatal("Resolve through a refusing bootstrap succeeded")
	}
	if _, err := r.Resolve(t.Context(), host); err == nil {
		t.Fatal("Resolve within RetryAfter succeeded")
	}
	r.Use([]Source{good})
	if res, err := r.Resolve(t.Context(), host); err != nil || len(res.Addrs) != 1 {
		t.Errorf("Resolve after Use = %v, %v; want 127.0.0.1", res.Addrs, err)
	}
}

// The addresses are the host's, through its CNAMEs; other names' records
// and unspecified addresses are ignored.
func TestFollow(t *testing.T) {
	t.Parallel()
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	rrs := []dns.RR{
		rr("other.test. 50 IN A 192.0.2.9"),
		rr("dot.test. 300 IN CNAME edge.test."),
		rr("edge.test. 120 IN A 192.0.2.1"),
		rr("edge.test. 120 IN A 0.0.0.0"),
		rr("EDGE.test. 200 IN A 192.0.2.2"),
	}
	addrs, ttl := follow(rrs, "dot.test.", dns.TypeA)
	want := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")}
	if len(addrs) != 2 || addrs[0] != want[0] || addrs[1] != want[1] || ttl != 120*time.Second {
		t.Errorf("follow = %v, %v; want %v, 2m0s", addrs, ttl, want)
	}
	if addrs, _ := follow(rrs, "dot.test.", dns.TypeAAAA); len(addrs) != 0 {
		t.Errorf("follow AAAA = %v, want none", addrs)
	}
}
