package query

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/wire"
)

// *actors.Pool is what the daemon passes as Pool.
var _ Pool = (*actors.Pool)(nil)

// errNoFake is what a fakePool without OnExchange fails with.
var errNoFake = errors.New("fake pool: no answer configured")

// testClient is the address every test query comes from.
var testClient = netip.MustParseAddrPort("192.0.2.7:53211")

// testID is the ID of every test query; fakes answer with other IDs to
// prove that the client's is restored.
const testID = 0xBEEF

// fakePool is a Pool whose Exchange is a function field; it counts calls.
type fakePool struct {
	mu    sync.Mutex
	calls int
	raws  int      // answers a bytePool handed over as bytes
	last  *dns.Msg // the last query it saw

	OnExchange func(ctx context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result
}

func (p *fakePool) Exchange(ctx context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result {
	p.mu.Lock()
	p.calls++
	p.last = q.Copy() // q is the query path's, valid only during the call
	p.mu.Unlock()
	if p.OnExchange == nil {
		return actors.Result{Err: errNoFake, Upstream: -1}
	}
	return p.OnExchange(ctx, q, trail)
}

func (p *fakePool) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// Raws is how many answers a bytePool handed over as bytes.
func (p *fakePool) Raws() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.raws
}

func (p *fakePool) Last() *dns.Msg {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// answeringPool returns a pool that answers every query from upstream 0
// with the records given (in text form), as a fresh message with a
// different ID, the way a transport would hand one over.
func answeringPool(tb testing.TB, records ...string) *fakePool {
	tb.Helper()
	rrs := mustRRs(tb, records...)
	return &fakePool{OnExchange: func(_ context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result {
		m := new(dns.Msg)
		m.SetReply(q)
		m.Id = q.Id + 1
		m.RecursionAvailable = true
		for _, rr := range rrs {
			m.Answer = append(m.Answer, dns.Copy(rr))
		}
		if o := q.IsEdns0(); o != nil {
			m.SetEdns0(4096, o.Do())
		}
		trail = append(trail, actors.Attempt{Upstream: 0, Outcome: actors.OutcomeAnswer})
		return actors.Result{Msg: m, Upstream: 0, Attempts: trail}
	}}
}

// recorder is a Hooks that keeps a copy of every entry.
type recorder struct {
	mu      sync.Mutex
	entries []Entry
}

func (r *recorder) QueryDone(e *Entry) {
	c := *e
	c.Attempts = append([]actors.Attempt(nil), e.Attempts...) // e's trail is reused
	r.mu.Lock()
	r.entries = append(r.entries, c)
	r.mu.Unlock()
}

// only returns the one entry recorded, failing the test unless there is
// exactly one.
func (r *recorder) only(tb testing.TB) Entry {
	tb.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.entries) != 1 {
		tb.Fatalf("QueryDone called %d times, want 1", len(r.entries))
	}
	return r.entries[0]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

// newTestHandler builds a handler with a recorder; a nil pool becomes one
// that fails every query.
func newTestHandler(tb testing.TB, cfg HandlerConfig) (*Handler, *recorder) {
	tb.Helper()
	if cfg.Pool == nil {
		cfg.Pool = &fakePool{}
	}
	if cfg.UpstreamNames == nil {
		cfg.UpstreamNames = []string{"primary", "secondary"}
	}
	rec := &recorder{}
	cfg.Hooks = rec
	h, err := NewHandler(cfg)
	if err != nil {
		tb.Fatalf("NewHandler: %v", err)
	}
	return h, rec
}

// newQuery is a client query with ID testID and RD set.
func newQuery(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = testID
	return m
}

// withEDNS adds an OPT record to q.
func withEDNS(q *dns.Msg, size uint16, do bool) *dns.Msg {
	q.SetEdns0(size, do)
	return q
}

// exchange packs q, serves it over proto and unpacks the answer, failing
// the test when there is none or it does not parse.
func exchange(tb testing.TB, h *Handler, q *dns.Msg, proto string) (*dns.Msg, []byte) {
	tb.Helper()
	raw, err := q.Pack()
	if err != nil {
		tb.Fatalf("packing the query: %v", err)
	}
	out := h.Serve(context.Background(), raw, proto, testClient)
	if out == nil {
		tb.Fatalf("Serve dropped the query")
	}
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil {
		tb.Fatalf("unpacking the answer: %v", err)
	}
	return m, out
}

// checkEcho fails the test unless the answer has the query's ID and
// question, exactly as written.
func checkEcho(tb testing.TB, q, m *dns.Msg) {
	tb.Helper()
	if m.Id != q.Id {
		tb.Errorf("answer ID = %#x, want the query's %#x", m.Id, q.Id)
	}
	if !m.Response {
		tb.Errorf("answer has QR clear")
	}
	if len(m.Question) != 1 || m.Question[0] != q.Question[0] {
		tb.Errorf("answer question = %v, want %v", m.Question, q.Question)
	}
}

func mustRRs(tb testing.TB, records ...string) []dns.RR {
	tb.Helper()
	rrs := make([]dns.RR, 0, len(records))
	for _, s := range records {
		rr, err := dns.NewRR(s)
		if err != nil {
			tb.Fatalf("dns.NewRR(%q): %v", s, err)
		}
		rrs = append(rrs, rr)
	}
	return rrs
}

// rrStrings returns the records in text form, for comparisons.
func rrStrings(rrs []dns.RR) []string {
	s := make([]string, len(rrs))
	for i, rr := range rrs {
		s[i] = rr.String()
	}
	return s
}

// countingExchanger is a zone client made of a function; it counts calls.
type countingExchanger struct {
	mu    sync.Mutex
	calls int
	last  *dns.Msg
	fn    func(ctx context.Context, q *dns.Msg) (*dns.Msg, error)
}

func (c *countingExchanger) Exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	c.mu.Lock()
	c.calls++
	c.last = q.Copy() // q is the query path's, valid only during the call
	c.mu.Unlock()
	return c.fn(ctx, q)
}

func (c *countingExchanger) Calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// resolverAnswering returns a zone client that answers every query with
// rcode and the records given, under a different ID.
func resolverAnswering(tb testing.TB, rcode int, records ...string) *countingExchanger {
	tb.Helper()
	rrs := mustRRs(tb, records...)
	return &countingExchanger{fn: func(_ context.Context, q *dns.Msg) (*dns.Msg, error) {
		m := new(dns.Msg)
		m.SetRcode(q, rcode)
		m.Id = q.Id ^ 0xFFFF
		for _, rr := range rrs {
			m.Answer = append(m.Answer, dns.Copy(rr))
		}
		return m, nil
	}}
}

// resolverFailing returns a zone client that fails every query with err.
func resolverFailing(err error) *countingExchanger {
	return &countingExchanger{fn: func(context.Context, *dns.Msg) (*dns.Msg, error) {
		return nil, err
	}}
}

// bytePool is a fakePool with the byte path: it packs the fake's answer
// into the query's buffer, as a transport reads one, and hands it over as
// bytes when wire.LayoutAnswer vouches for them, as a message otherwise.
type bytePool struct{ *fakePool }

var _ WirePool = bytePool{}

func (p bytePool) ExchangeWire(ctx context.Context, q *wire.WireQuery, trail []actors.Attempt) actors.Result {
	res := p.Exchange(ctx, q.Msg, trail)
	if res.Msg == nil {
		return res
	}
	const wireID = 0x5EED
	res.Msg.Id = wireID
	b, err := res.Msg.PackBuffer(q.Buf[:cap(q.Buf)])
	if err != nil {
		panic(err) // the fake's answers pack
	}
	if l, ok := wire.LayoutAnswer(q.Packed, b, wireID); ok {
		res.Msg, res.Raw, res.Layout = nil, b, l
		p.mu.Lock()
		p.raws++
		p.mu.Unlock()
	}
	return res
}

// poolKinds serves a test's fakePool with and without the byte path.
var poolKinds = []struct {
	name string
	wrap func(*fakePool) Pool
}{
	{"msg", func(p *fakePool) Pool { return p }},
	{"bytes", func(p *fakePool) Pool { return bytePool{p} }},
}
