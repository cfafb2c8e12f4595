package query

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
	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
	"github.com/nxdnsd/nxdnsd/wire/server"
	"github.com/nxdnsd/nxdnsd/wire/transport"
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

// fakePool is a Pool whose Exchange is a function field of the message
// level (it sees the query's Msg and answers with a Msg); it counts calls.
type fakePool struct {
	mu         sync.Mutex
	calls      int
	raws       int        // answers a bytePool handed over as bytes
	last       *dns.Msg   // the last query it saw
	lastPacked []byte     // the last query's bytes, as a transport sends them
	arrival    time.Time  // the last query's arrival
	client     netip.Addr // the last query's client

	OnExchange func(ctx context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result
}

func (p *fakePool) Exchange(ctx context.Context, q *transport.Query, arrival time.Time, trail []actors.Attempt) actors.Result {
	p.mu.Lock()
	p.calls++
	// q is the query path's, valid only during the call.
	p.last = q.Msg.Copy()
	p.lastPacked = append([]byte(nil), q.Packed...)
	p.arrival = arrival
	p.client = q.Client
	p.mu.Unlock()
	if p.OnExchange == nil {
		return actors.Result{Err: errNoFake}
	}
	return p.OnExchange(ctx, q.Msg, trail)
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

// LastPacked is the last query's Packed bytes, as the pool's transports
// would send them.
func (p *fakePool) LastPacked() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastPacked
}

// Arrival is the arrival the last query was handed to the pool with.
func (p *fakePool) Arrival() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.arrival
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
		trail = append(trail, actors.Attempt{Upstream: "primary", Outcome: actors.OutcomeAnswer})
		return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "primary", Attempts: trail}
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

// serve is h.ServeDNS of raw, received over proto from testClient, with
// no memory for the answer.
func serve(ctx context.Context, h *Handler, raw []byte, proto string) []byte {
	return serveInto(ctx, h, raw, proto, nil)
}

// serveInto is serve with buf as the memory for the answer, as a listener
// lends it.
func serveInto(ctx context.Context, h *Handler, raw []byte, proto string, buf []byte) []byte {
	return h.ServeDNS(ctx, &server.Request{Raw: raw, Proto: proto, Client: testClient, Answer: buf})
}

// exchange packs q, serves it over proto and unpacks the answer, failing
// the test when there is none or it does not parse.
func exchange(tb testing.TB, h *Handler, q *dns.Msg, proto string) (*dns.Msg, []byte) {
	tb.Helper()
	raw, err := q.Pack()
	if err != nil {
		tb.Fatalf("packing the query: %v", err)
	}
	out := serve(context.Background(), h, raw, proto)
	if out == nil {
		tb.Fatalf("ServeDNS dropped the query")
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

// countingExchanger is a zone client made of a message-level function; it
// counts calls and keeps what the last one was given.
type countingExchanger struct {
	mu         sync.Mutex
	calls      int
	last       *dns.Msg
	lastPacked []byte
	lastExpiry time.Time
	fn         func(ctx context.Context, q *dns.Msg) (*dns.Msg, error)
}

func (c *countingExchanger) Exchange(ctx context.Context, q *transport.Query, expiry time.Time) (transport.Answer, error) {
	c.mu.Lock()
	c.calls++
	// q is the query path's, valid only during the call.
	c.last = q.Msg.Copy()
	c.lastPacked = append([]byte(nil), q.Packed...)
	c.lastExpiry = expiry
	c.mu.Unlock()
	m, err := c.fn(ctx, q.Msg)
	return transport.Answer{Msg: m}, err
}

func (c *countingExchanger) Calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// byteZone is a countingExchanger on the byte path (see onBytePath); it
// counts the answers it handed over as bytes.
type byteZone struct {
	*countingExchanger
	raws *atomic.Int64
}

func (z byteZone) Exchange(ctx context.Context, q *transport.Query, expiry time.Time) (transport.Answer, error) {
	a, err := z.countingExchanger.Exchange(ctx, q, expiry)
	if err != nil {
		return a, err
	}
	a, raw := onBytePath(q, a)
	if raw {
		z.raws.Add(1)
	}
	return a, nil
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

// bytePool is a fakePool on the byte path: it packs the fake's answer
// into the query's buffer, as a transport reads one, and hands it over as
// bytes when dnsmsg.LayoutAnswer vouches for them, as a message otherwise.
type bytePool struct{ *fakePool }

func (p bytePool) Exchange(ctx context.Context, q *transport.Query, arrival time.Time, trail []actors.Attempt) actors.Result {
	res := p.fakePool.Exchange(ctx, q, arrival, trail)
	var raw bool
	if res.Answer, raw = onBytePath(q, res.Answer); raw {
		p.mu.Lock()
		p.raws++
		p.mu.Unlock()
	}
	return res
}

// onBytePath turns a fake's message answer to q into what a transport
// reading bytes hands over: packed into q.Buf under a wire ID, as bytes
// when dnsmsg.LayoutAnswer vouches for them (raw true), as the message
// otherwise.
func onBytePath(q *transport.Query, a transport.Answer) (_ transport.Answer, raw bool) {
	if a.Msg == nil {
		return a, false
	}
	const wireID = 0x5EED
	a.Msg.Id = wireID
	b, err := a.Msg.PackBuffer(q.Buf[:cap(q.Buf)])
	if err != nil {
		panic(err) // the fakes' answers pack
	}
	l, ok := dnsmsg.LayoutAnswer(q.Packed, b, wireID)
	if !ok {
		return a, false
	}
	return transport.Answer{Raw: b, Layout: l}, true
}

// poolKinds serves a test's fakePool with and without the byte path.
var poolKinds = []struct {
	name string
	wrap func(*fakePool) Pool
}{
	{"msg", func(p *fakePool) Pool { return p }},
	{"bytes", func(p *fakePool) Pool { return bytePool{p} }},
}
