package query

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/wire/server"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// A handler whose pool's only upstream is the handler itself, in memory:
// the upstream's transport serves every query it is sent through the
// handler, as nxdnsd configured as its own upstream does over a socket.
// The actor's start-up check comes back as a client query and is answered
// NXDOMAIN at once, without going to the pool; the upstream is found
// looping before its probe is sent, so the loop carries nothing round but
// the check. A client query then gets SERVFAIL from the pool, which tries
// nothing: the handler served two queries in all.
//
// Mutation check: without the loop hook in answerSpecial the check is answered by
// the special-use names and never reported; the probe behind it goes
// round the loop until its deadline, and the upstream is not "loop".
func TestSelfLoopFoundThroughTheHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loops := actors.NewLoops()
		ready := make(chan struct{})
		var h *Handler
		var mu sync.Mutex
		var looped []string
		self := transport.MsgFunc(func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
			<-ready
			raw, err := m.Pack()
			if err != nil {
				return nil, err
			}
			out := h.ServeDNS(ctx, &server.Request{Raw: raw, Proto: ProtoUDP, Client: testClient})
			a := new(dns.Msg)
			if err := a.Unpack(out); err != nil {
				return nil, err
			}
			return a, nil
		})
		pool, err := actors.NewPool(actors.Policy{
			AttemptTimeout: 2500 * time.Millisecond,
			TotalTimeout:   5000 * time.Millisecond,
			Health: actors.HealthPolicy{FailureThreshold: 3, Backoff: time.Second, BackoffMax: 30 * time.Second, ProbeTimeout: time.Second,
				Loops: loops,
				OnLoop: func(name string, looping bool, _ actors.Status) {
					mu.Lock()
					looped = append(looped, name)
					mu.Unlock()
				}},
		}, []actors.Spec{{Name: "self", Slots: 4, Transport: self}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		var rec *recorder
		h, rec = newTestHandler(t, HandlerConfig{Pool: pool, Loops: loops})
		close(ready)
		synctest.Wait()

		if st := pool.Status()[0]; !st.Loop || !errors.Is(st.LastError, actors.ErrLoop) {
			t.Fatalf("after the start-up check: %+v, want loop", st)
		}
		e := rec.only(t)
		if !strings.HasSuffix(e.QName, "."+actors.LoopCheckZone) || e.Rcode != dns.RcodeNameError || e.Source != SourceSpecial {
			t.Errorf("the check came back as %s, answered %s from %s; want NXDOMAIN at once", e.QName, dns.RcodeToString[e.Rcode], e.Source)
		}
		m, _ := exchange(t, h, newQuery("example.com.", dns.TypeA), ProtoUDP)
		if m.Rcode != dns.RcodeServerFailure {
			t.Errorf("a client query: %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
		}
		synctest.Wait()
		if n := rec.count(); n != 2 {
			t.Errorf("the handler served %d queries, want 2: the check and the client's", n)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(looped) != 1 || looped[0] != "self" {
			t.Errorf("OnLoop heard %v, want self once", looped)
		}
	})
}

// Another nxdnsd's check is forwarded like any name, so that a loop
// through this nxdnsd reaches the one that sent it; without loop checks,
// and for a name that only looks like a check, the special-use names
// answer it NXDOMAIN.
func TestForeignLoopCheckForwarded(t *testing.T) {
	foreign := strings.Repeat("f", 16) + ".00000001.00000002." + strings.Repeat("e", 16) + "." + actors.LoopCheckZone
	if len(foreign) != actors.LoopCheckLen {
		t.Fatalf("%q is %d bytes, want %d", foreign, len(foreign), actors.LoopCheckLen)
	}
	for _, tc := range []struct {
		name      string
		qname     string
		loops     *actors.Loops
		forwarded bool
	}{
		{"foreign check", foreign, actors.NewLoops(), true},
		{"foreign check, upper case", strings.ToUpper(foreign), actors.NewLoops(), true},
		{"without loop checks", foreign, nil, false},
		{"too short for a check", "f." + actors.LoopCheckZone, actors.NewLoops(), false},
		{"of the check's length, not under its zone", strings.Repeat("a", 30) + "." + strings.Repeat("b", actors.LoopCheckLen-len("invalid.")-32) + ".invalid.", actors.NewLoops(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := answeringPool(t)
			h, rec := newTestHandler(t, HandlerConfig{Pool: pool, Loops: tc.loops})
			if len(tc.qname) != actors.LoopCheckLen && tc.name != "too short for a check" {
				t.Fatalf("%q is %d bytes, want %d", tc.qname, len(tc.qname), actors.LoopCheckLen)
			}
			m, _ := exchange(t, h, newQuery(tc.qname, dns.TypeTXT), ProtoUDP)
			if got := pool.Calls() == 1; got != tc.forwarded {
				t.Errorf("forwarded %v, want %v", got, tc.forwarded)
			}
			if !tc.forwarded && (m.Rcode != dns.RcodeNameError || rec.only(t).Source != SourceSpecial) {
				t.Errorf("answered %s from %s, want NXDOMAIN from the special-use names", dns.RcodeToString[m.Rcode], rec.only(t).Source)
			}
		})
	}
}

// With loop checks on, a forwarded query still allocates at most one
// object, whether or not its name has a check's length.
func TestLoopChecksCostNoAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	for _, name := range []string{"www.example.com.", strings.Repeat("a", 30) + "." + strings.Repeat("b", actors.LoopCheckLen-len(".example.com.")-31) + ".example.com."} {
		q := newQuery(name, dns.TypeA)
		a := new(dns.Msg)
		a.SetReply(q)
		up := &memoryUpstream{answer: mustPack(t, a)}
		pool, err := actors.NewPool(actors.Policy{
			AttemptTimeout: 2500 * time.Millisecond,
			TotalTimeout:   5000 * time.Millisecond,
			Health:         actors.HealthPolicy{FailureThreshold: 3, Backoff: time.Second, BackoffMax: time.Minute, Loops: actors.NewLoops()},
		}, []actors.Spec{{Name: "primary", Slots: 1024, Transport: up}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		h, err := NewHandler(HandlerConfig{Pool: pool, Hooks: HooksFunc(func(*Entry) {}), Loops: actors.NewLoops()})
		if err != nil {
			t.Fatal(err)
		}
		raw := mustPack(t, q)
		buf := make([]byte, 0, 4096)
		ctx := context.Background()
		allocs := testing.AllocsPerRun(1000, func() {
			if out := serveInto(ctx, h, raw, ProtoUDP, buf); len(out) < len(raw) {
				t.Fatalf("answer %x", out)
			}
		})
		pool.Close()
		if allocs > 1 {
			t.Errorf("%s: a forwarded query allocates %v objects, want at most 1", name, allocs)
		}
	}
}

// What the query path does with each kind of name under the checks' zone
// (issue 25): every one is marked to stay out of the query log and the
// recent queries; a name of this process's checks that is not a check an
// upstream is waiting for (a forged tag, another upstream's id, the real
// check sent back a minute later) is answered NXDOMAIN, not forwarded,
// and marks no upstream; another nxdnsd's is forwarded; any other name
// under the zone is answered NXDOMAIN as under invalid.. Names outside the
// zone are not marked.
func TestLoopCheckNames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		loops := actors.NewLoops()
		sent := make(chan string, 1)
		honest := transport.MsgFunc(func(_ context.Context, m *dns.Msg) (*dns.Msg, error) {
			r := new(dns.Msg)
			r.SetReply(m)
			if strings.HasSuffix(m.Question[0].Name, "."+actors.LoopCheckZone) {
				r.Rcode = dns.RcodeNameError
				select {
				case sent <- m.Question[0].Name:
				default:
				}
			}
			return r, nil
		})
		upstreams, err := actors.NewPool(actors.Policy{
			AttemptTimeout: 2500 * time.Millisecond,
			TotalTimeout:   5000 * time.Millisecond,
			Health:         actors.HealthPolicy{FailureThreshold: 3, Backoff: time.Second, BackoffMax: 30 * time.Second, ProbeTimeout: time.Second, Loops: loops},
		}, []actors.Spec{{Name: "honest", Slots: 4, Transport: honest}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer upstreams.Close()
		synctest.Wait()
		check := <-sent
		labels := strings.Split(check, ".")
		with := func(i int, label string) string {
			l := slices.Clone(labels)
			l[i] = label
			return strings.Join(l, ".")
		}
		time.Sleep(time.Minute)

		for _, tc := range []struct {
			qname      string
			forwarded  bool
			loopCheck  bool
			nxdomainAt bool // answered NXDOMAIN from the special-use names
		}{
			{check, false, true, true}, // a minute late
			{strings.ToUpper(check), false, true, true},
			{with(0, strings.Repeat("a", len(labels[0]))), false, true, true},
			{with(1, "00000002"), false, true, true},
			{with(2, "ffffffff"), false, true, true},
			{with(1, "0000000g"), false, true, true},
			{with(3, strings.Repeat("e", len(labels[3]))), true, true, false}, // another nxdnsd's
			{actors.LoopCheckZone, false, true, true},
			{"x." + actors.LoopCheckZone, false, true, true},
			{"xloop-check.nxdnsd.invalid.", false, false, true},
			{"nxdnsd.invalid.", false, false, true},
			{"example.com.", true, false, false},
		} {
			pool := answeringPool(t)
			h, rec := newTestHandler(t, HandlerConfig{Pool: pool, Loops: loops})
			m, _ := exchange(t, h, newQuery(tc.qname, dns.TypeTXT), ProtoUDP)
			e := rec.only(t)
			if got := pool.Calls() == 1; got != tc.forwarded {
				t.Errorf("%s: forwarded %v, want %v", tc.qname, got, tc.forwarded)
			}
			if e.LoopCheck != tc.loopCheck {
				t.Errorf("%s: Entry.LoopCheck %v, want %v", tc.qname, e.LoopCheck, tc.loopCheck)
			}
			if tc.nxdomainAt && (m.Rcode != dns.RcodeNameError || e.Source != SourceSpecial) {
				t.Errorf("%s: answered %s from %s, want NXDOMAIN from the special-use names", tc.qname, dns.RcodeToString[m.Rcode], e.Source)
			}
		}
		synctest.Wait()
		if st := upstreams.Status()[0]; st.Loop || st.InBackoff {
			t.Errorf("the upstream after the names: %+v, want healthy", st)
		}
	})
}
