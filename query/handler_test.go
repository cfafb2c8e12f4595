package query

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServeEntryTiming(t *testing.T) {
	t.Parallel()
	h, rec := newTestHandler(t, HandlerConfig{})
	before := time.Now()
	exchange(t, h, newQuery("localhost.", dns.TypeA), "tcp")
	elapsed := time.Since(before)

	e := rec.only(t)
	if e.Time.Before(before) || e.Time.After(before.Add(elapsed)) {
		t.Errorf("entry time %v is outside the call (%v + %v)", e.Time, before, elapsed)
	}
	if e.Duration < 0 || e.Duration > elapsed {
		t.Errorf("entry duration %v, want within the call's %v", e.Duration, elapsed)
	}
	if e.Client != testClient || e.Proto != "tcp" || e.QName != "localhost." || e.QType != dns.TypeA {
		t.Errorf("entry = %+v, want the client, proto tcp and the question", e)
	}
}

func TestServeWithoutHooks(t *testing.T) {
	t.Parallel()
	h, err := NewHandler(HandlerConfig{Pool: &fakePool{}})
	if err != nil {
		t.Fatal(err)
	}
	raw := mustPack(t, newQuery("localhost.", dns.TypeAAAA))
	if out := serve(context.Background(), h, raw, ProtoUDP); out == nil {
		t.Fatal("ServeDNS dropped the query")
	}
}

// The handler changes its configuration's slices neither now nor later.
func TestNewHandlerCopiesConfig(t *testing.T) {
	t.Parallel()
	zones := []Zone{{Name: "lan.", Resolver: "192.168.1.1:53", Client: resolverAnswering(t, 0)}}
	h, rec := newTestHandler(t, HandlerConfig{
		Pool:  answeringPool(t),
		Zones: zones,
	})
	zones[0].Name, zones[0].Resolver = "other.", "changed"
	exchange(t, h, newQuery("example.com.", dns.TypeA), ProtoUDP)
	exchange(t, h, newQuery("nas.lan.", dns.TypeA), ProtoUDP)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got := rec.entries[0].Upstream; got != "primary" {
		t.Errorf("pool entry upstream = %q, want primary", got)
	}
	if got := rec.entries[1]; got.Zone != "lan." || got.Upstream != "192.168.1.1:53" {
		t.Errorf("zone entry: zone %q upstream %q, want lan. and 192.168.1.1:53", got.Zone, got.Upstream)
	}
}

// consistencyHooks checks, during QueryDone, that an entry's parts belong
// to one query: the pool below reports, for query qN, a trail of N+1
// attempts lasting N ms each. Reused entries and trails would mix them.
type consistencyHooks struct {
	calls, bad atomic.Int64
}

func (c *consistencyHooks) QueryDone(e *Entry) {
	c.calls.Add(1)
	n, err := strconv.Atoi(strings.TrimPrefix(strings.SplitN(e.QName, ".", 2)[0], "q"))
	if err != nil || len(e.Attempts) != n%6+1 {
		c.bad.Add(1)
		return
	}
	for _, a := range e.Attempts {
		if a.Duration != time.Duration(n)*time.Millisecond {
			c.bad.Add(1)
			return
		}
	}
}

func TestServeConcurrentQueriesKeepTheirOwn(t *testing.T) {
	t.Parallel()
	names := []string{"a", "b"}
	pool := &fakePool{OnExchange: func(_ context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result {
		n, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(q.Question[0].Name, ".", 2)[0], "q"))
		for range n%6 + 1 { // past trailCap for some queries
			trail = append(trail, actors.Attempt{Upstream: names[n%2], Duration: time.Duration(n) * time.Millisecond})
		}
		m := new(dns.Msg)
		m.SetReply(q)
		m.Answer = mustRRs(t, fmt.Sprintf("%s 60 IN TXT \"%d\"", q.Question[0].Name, n))
		return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: names[n%2], Attempts: trail}
	}}
	hooks := &consistencyHooks{}
	h, err := NewHandler(HandlerConfig{Pool: pool, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}

	const workers, perWorker = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				n := w*perWorker + i
				q := newQuery(fmt.Sprintf("q%d.example.", n), dns.TypeTXT)
				q.Id = uint16(n)
				raw, _ := q.Pack()
				out := serve(context.Background(), h, raw, ProtoUDP)
				m := new(dns.Msg)
				if err := m.Unpack(out); err != nil {
					errs <- err
					continue
				}
				if m.Id != uint16(n) || len(m.Answer) != 1 || m.Answer[0].(*dns.TXT).Txt[0] != strconv.Itoa(n) {
					errs <- fmt.Errorf("query %d got %v", n, m)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if calls, bad := hooks.calls.Load(), hooks.bad.Load(); calls != workers*perWorker || bad != 0 {
		t.Errorf("QueryDone: %d calls, %d inconsistent entries; want %d and 0", calls, bad, workers*perWorker)
	}
}
