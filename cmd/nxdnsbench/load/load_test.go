package load

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/nxdnsd/nxdnsd/cmd/nxdnsbench/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func startFake(tb testing.TB, mode fake.Mode) *fake.Server {
	tb.Helper()
	s, err := fake.Start(fake.Config{Addr: "127.0.0.1:0", Mode: mode, Sockets: 1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func TestAppendQueryParses(t *testing.T) {
	t.Parallel()
	b := appendQuery(nil, 0xBEEF, "f", 12, 34567)
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		t.Fatal(err)
	}
	if m.Id != 0xBEEF || !m.RecursionDesired || len(m.Question) != 1 ||
		m.Question[0] != (dns.Question{Name: "f12-34567.bench.example.", Qtype: dns.TypeA, Qclass: dns.ClassINET}) {
		t.Fatalf("query %v", m)
	}
}

func TestRunCountsAnswersByRcode(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mode  fake.Mode
		rcode int
	}{
		{fake.Mode{}, dns.RcodeSuccess},
		{fake.Mode{Kind: fake.Refuse}, dns.RcodeRefused},
	} {
		s := startFake(t, tt.mode)
		res, err := Run(context.Background(), Config{
			Server: s.Addr(), Queries: 500, InFlight: 20, Timeout: 5 * time.Second, Prefix: "t",
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Sent != 500 || res.Rcodes[tt.rcode] != 500 || res.Answered() != 500 || res.Timeouts != 0 {
			t.Fatalf("%v: %+v", tt.mode, res)
		}
		if p50, p99 := res.Percentile(0.5), res.Percentile(0.99); p50 <= 0 || p99 < p50 || res.Latencies[499] < p99 {
			t.Fatalf("percentiles p50=%v p99=%v max=%v", p50, p99, res.Latencies[499])
		}
	}
}

func TestRunCountsTimeoutsAndUnsent(t *testing.T) {
	t.Parallel()
	s := startFake(t, fake.Mode{Kind: fake.Blackhole})
	// 10 queries, 5 in flight, 50 ms each, sending stops after 1 ms: the
	// first five time out, the rest are never sent.
	res, err := Run(context.Background(), Config{
		Server: s.Addr(), Queries: 10, InFlight: 5, Timeout: 50 * time.Millisecond,
		Duration: time.Millisecond, Prefix: "t",
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent+res.Unsent != 10 || res.Timeouts != res.Sent || res.Answered() != 0 {
		t.Fatalf("%+v", res)
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	t.Parallel()
	s := startFake(t, fake.Mode{Kind: fake.Blackhole})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Run(ctx, Config{Server: s.Addr(), Queries: 100, InFlight: 4, Timeout: time.Minute, Prefix: "t"})
	if err == nil || res.Sent != 0 {
		t.Fatalf("cancelled run: %+v, %v", res, err)
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	r := &Result{}
	for i := 1; i <= 100; i++ {
		r.Latencies = append(r.Latencies, time.Duration(i))
	}
	for p, want := range map[float64]time.Duration{0.5: 50, 0.95: 95, 0.99: 99, 1: 100, 0: 1} {
		if got := r.Percentile(p); got != want {
			t.Errorf("Percentile(%v) = %v, want %v", p, got, want)
		}
	}
}

// With Names every worker asks the same Names names, all of them, from
// places of its own; without, each worker's names are its own.
func TestWorkerNames(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	starts := map[int]bool{}
	for id := range 4 {
		w := &worker{id: id, cfg: &Config{Names: 10}}
		_, start := w.name(0)
		starts[start] = true
		for seq := range 25 {
			wid, n := w.name(seq)
			if wid != 0 || n < 0 || n >= 10 {
				t.Fatalf("worker %d query %d: name %d-%d, want 0-<0..9>", id, seq, wid, n)
			}
			seen[n] = true
		}
	}
	if len(starts) != 4 {
		t.Errorf("the 4 workers start at %d places, want 4", len(starts))
	}
	if len(seen) != 10 {
		t.Errorf("%d of the 10 names asked", len(seen))
	}
	w := &worker{id: 3, cfg: &Config{}}
	if wid, n := w.name(5); wid != 3 || n != 5 {
		t.Errorf("without Names: %d-%d, want 3-5", wid, n)
	}
}
