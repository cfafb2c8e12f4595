package server

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// fastEcho is a FastHandler: it answers names under "fast." on the
// listener's goroutine, hands every other query on with a Pending, and
// panics on "boom.fast.". It counts what reached each path.
type fastEcho struct {
	fast, slow   atomic.Int32
	stateCarried atomic.Int32
	abandoned    atomic.Int32
	hold         chan struct{} // or nil: ServeDNS of "hold." names waits on it
	holding      chan struct{} // or nil: told, without blocking, when a "hold." query starts waiting
}

// fastState is what fastEcho's ServeFast keeps of a query it hands on.
type fastState struct {
	h    *fastEcho
	name string
}

var _ Pending = (*fastState)(nil)

// Serve finishes the query on the worker, counting that its state came
// with the very query it was made for.
func (st *fastState) Serve(ctx context.Context, req *Request) []byte {
	var q dns.Msg
	if err := q.Unpack(req.Raw); err == nil && st.name == q.Question[0].Name {
		st.h.stateCarried.Add(1)
	}
	return st.h.ServeDNS(ctx, req)
}

func (st *fastState) Abandon() { st.h.abandoned.Add(1) }

func (h *fastEcho) ServeFast(req *Request) ([]byte, bool) {
	var q dns.Msg
	if err := q.Unpack(req.Raw); err != nil {
		return nil, true // dropped
	}
	name := q.Question[0].Name
	if name == "boom.fast." {
		panic("fast path bug")
	}
	if !strings.HasSuffix(name, "fast.") {
		req.Pending = &fastState{h: h, name: name}
		return nil, false
	}
	h.fast.Add(1)
	return echo(context.Background(), req), true
}

func (h *fastEcho) ServeDNS(ctx context.Context, req *Request) []byte {
	h.slow.Add(1)
	var q dns.Msg
	if err := q.Unpack(req.Raw); err == nil && h.hold != nil && strings.HasPrefix(q.Question[0].Name, "hold.") {
		select {
		case h.holding <- struct{}{}:
		default:
		}
		select {
		case <-h.hold:
		case <-ctx.Done():
		}
	}
	return echo(ctx, req)
}

// The UDP listener answers what its FastHandler can answer on its own
// goroutine and hands the rest to a worker with the handler's Pending and a
// copy of the query; a panic in the fast path is answered SERVFAIL and the
// listener goes on.
func TestServerFastPath(t *testing.T) {
	t.Parallel()
	h := &fastEcho{}
	var panics atomic.Int32
	udp, _ := startServer(t, &Server{Handler: h, OnPanic: func() { panics.Add(1) }})
	c := &dns.Client{Net: "udp", Timeout: ioTimeout}
	ask := func(name string) *dns.Msg {
		t.Helper()
		r, _, err := c.Exchange(queryFor(name), udp)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	for range 3 {
		if r := ask("a.fast."); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("fast answer: %v", r)
		}
		if r := ask("slow.example."); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("worker answer: %v", r)
		}
	}
	if r := ask("boom.fast."); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("a panic in the fast path: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	if r := ask("b.fast."); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("after the panic the listener answers %s", dns.RcodeToString[r.Rcode])
	}
	if h.fast.Load() != 4 || h.slow.Load() != 3 || h.stateCarried.Load() != 3 || panics.Load() != 1 {
		t.Errorf("fast %d, worker %d (state carried %d), panics %d; want 4, 3 (3), 1",
			h.fast.Load(), h.slow.Load(), h.stateCarried.Load(), panics.Load())
	}
}

func queryFor(name string) *dns.Msg {
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	return q
}

// With UDPSockets > 1 an address gets that many sockets on one port (each
// with its reader), Addrs lists the address once, and queries from many
// client sockets, which the kernel spreads over them, are answered.
func TestServerUDPSockets(t *testing.T) {
	t.Parallel()
	s := &Server{Handler: HandlerFunc(echo), UDPSockets: 3}
	udp, _ := startServer(t, s)
	if n := len(s.udp); n != 3 {
		t.Fatalf("%d UDP sockets, want 3", n)
	}
	if us, _ := s.Addrs(); len(us) != 1 {
		t.Fatalf("Addrs lists %d UDP addresses, want the one", len(us))
	}
	for i := range 12 { // 12 client sockets: the kernel spreads them over the three
		c := &dns.Client{Net: "udp", Timeout: ioTimeout}
		if _, _, err := c.Exchange(queryFor("x.example."), udp); err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
	}
}

// A query the fast path handed on but the server then refuses (overload)
// is abandoned: the handler gets back what ServeFast kept for it.
func TestServerFastPathAbandonsRefused(t *testing.T) {
	t.Parallel()
	h := &fastEcho{hold: make(chan struct{}), holding: make(chan struct{}, 1)}
	udp, _ := startServer(t, &Server{Handler: h, MaxConcurrentQueries: 1})
	t.Cleanup(func() { close(h.hold) })
	c := &dns.Client{Net: "udp", Timeout: ioTimeout}
	go func() { _, _, _ = c.Exchange(queryFor("hold.example."), udp) }()
	select {
	case <-h.holding: // its worker holds the one permit
	case <-time.After(ioTimeout):
		t.Fatal("the first query never reached its worker")
	}
	// The second query, handed on by the fast path, finds the one permit
	// taken: REFUSED, and abandoned.
	r, _, err := c.Exchange(queryFor("second.example."), udp)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeRefused {
		t.Fatalf("the second query: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	if h.abandoned.Load() < 1 {
		t.Errorf("a refused query handed on by the fast path was not abandoned")
	}
}
