package query

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

func TestServePoolAnswer(t *testing.T) {
	t.Parallel()
	for _, kind := range poolKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			records := []string{
				"example.com.\t300\tIN\tCNAME\twww.example.net.",
				"www.example.net.\t60\tIN\tA\t192.0.2.80",
			}
			authority := []string{"example.net.\t3600\tIN\tNS\tns1.example.net."}
			expired := errors.New("attempt expired")
			pool := &fakePool{OnExchange: func(_ context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result {
				m := new(dns.Msg)
				m.SetReply(q)
				m.Id = 0x1111                       // a transport that forgot to restore the ID
				m.Question[0].Name = "example.com." // an upstream that lower-cased the question
				m.RecursionAvailable = true
				m.Answer = mustRRs(t, records...)
				m.Ns = mustRRs(t, authority...)
				trail = append(trail,
					actors.Attempt{Upstream: "primary", Outcome: actors.OutcomeExpired, Duration: 2500 * time.Millisecond, Err: expired},
					actors.Attempt{Upstream: "secondary", Outcome: actors.OutcomeAnswer, Duration: 8 * time.Millisecond})
				return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "secondary", Queued: 3 * time.Millisecond, Attempts: trail}
			}}
			h, rec := newTestHandler(t, HandlerConfig{Pool: kind.wrap(pool)})
			q := newQuery("ExAmple.COM.", dns.TypeA)
			m, _ := exchange(t, h, q, ProtoUDP)

			checkEcho(t, q, m)
			if kind.name == "bytes" && pool.Raws() != 1 {
				t.Errorf("the answer did not take the byte path")
			}
			if m.Rcode != dns.RcodeSuccess || !m.RecursionAvailable || m.Authoritative {
				t.Errorf("header = %+v, want the upstream's: NOERROR, RA, not AA", m.MsgHdr)
			}
			if got := rrStrings(m.Answer); !slices.Equal(got, records) {
				t.Errorf("answer =\n%q\nwant\n%q", got, records)
			}
			if got := rrStrings(m.Ns); !slices.Equal(got, authority) {
				t.Errorf("authority =\n%q\nwant\n%q", got, authority)
			}
			if len(m.Extra) != 0 {
				t.Errorf("additional = %v, want none for a client without EDNS", m.Extra)
			}

			e := rec.only(t)
			want := []actors.Attempt{
				{Upstream: "primary", Outcome: actors.OutcomeExpired, Duration: 2500 * time.Millisecond, Err: expired},
				{Upstream: "secondary", Outcome: actors.OutcomeAnswer, Duration: 8 * time.Millisecond},
			}
			if e.Source != SourcePool || e.Upstream != "secondary" || e.Queued != 3*time.Millisecond || e.PoolErr != nil ||
				e.QName != "ExAmple.COM." || e.QType != dns.TypeA || e.Rcode != dns.RcodeSuccess || !slices.Equal(e.Attempts, want) {
				t.Errorf("entry = %+v\nwant source pool, upstream secondary, queued 3ms, the client's question and the trail %+v", e, want)
			}
			if !pool.Arrival().Equal(e.Time) {
				t.Errorf("the pool was given arrival %v, want the entry's time %v", pool.Arrival(), e.Time)
			}
		})
	}
}

func TestServePoolErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		res      actors.Result
		upstream string
	}{
		{"budget exhausted, nothing recorded", actors.Result{Err: actors.ErrBudgetExhausted}, ""},
		{"every upstream failed", actors.Result{Err: errAllFailed, Upstream: "secondary"}, "secondary"},
		{"cancelled after a recorded failure", actors.Result{Err: context.Canceled, Upstream: "primary"}, "primary"},
		{"nobody attributed", actors.Result{Err: errAllFailed}, ""},
		{"no error and no message", actors.Result{Upstream: "primary"}, "primary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := &fakePool{OnExchange: func(context.Context, *dns.Msg, []actors.Attempt) actors.Result { return tt.res }}
			h, rec := newTestHandler(t, HandlerConfig{Pool: pool})
			q := withEDNS(newQuery("example.com.", dns.TypeAAAA), 1232, true)
			q.CheckingDisabled = true
			m, _ := exchange(t, h, q, ProtoUDP)
			checkEcho(t, q, m)
			if m.Rcode != dns.RcodeServerFailure || !m.RecursionDesired || !m.CheckingDisabled || !m.RecursionAvailable {
				t.Errorf("header = %+v, want SERVFAIL with RD, CD and RA", m.MsgHdr)
			}
			if len(m.Answer)+len(m.Ns) != 0 {
				t.Errorf("SERVFAIL carries records: %v %v", m.Answer, m.Ns)
			}
			if opt := m.IsEdns0(); opt == nil || !opt.Do() || opt.UDPSize() != dnsmsg.EDNSSize {
				t.Errorf("answer OPT = %v, want ours with DO echoed", opt)
			}
			e := rec.only(t)
			if e.Source != SourcePool || e.Upstream != tt.upstream || e.PoolErr != tt.res.Err || e.Rcode != dns.RcodeServerFailure {
				t.Errorf("entry: source %q upstream %q err %v rcode %d; want pool %q %v SERVFAIL",
					e.Source, e.Upstream, e.PoolErr, e.Rcode, tt.upstream, tt.res.Err)
			}
		})
	}
}

// errAllFailed stands for actors.ErrAllFailed: the query path treats every
// pool error alike.
var errAllFailed = errors.New("every upstream failed")

func TestServePoolDNSSEC(t *testing.T) {
	t.Parallel()
	for _, kind := range poolKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			answer := []string{
				"example.com.\t3600\tIN\tA\t93.184.215.14",
				"example.com.\t3600\tIN\tRRSIG\tA 13 2 3600 20261201000000 20261110000000 12345 example.com. kpZLm2mRm4mmjN2Jdk5MQc6SJIwqTcc0HlmNq7UFFbvDzEdR6SGhRUPa3iKNs8vD0Nt2+nK1j6vWQs+Hrzv5RA==",
			}
			authority := []string{
				"example.com.\t3600\tIN\tNSEC\twww.example.com. A NS SOA RRSIG NSEC DNSKEY",
			}
			pool := &fakePool{OnExchange: func(_ context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result {
				m := new(dns.Msg)
				m.SetReply(q)
				m.RecursionAvailable = true
				m.AuthenticatedData = true
				m.Answer = mustRRs(t, answer...)
				m.Ns = mustRRs(t, authority...)
				m.SetEdns0(4096, true)
				opt := m.IsEdns0()
				opt.Option = append(opt.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: "6e73312e6578616d706c65"})
				return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "primary", Attempts: append(trail, actors.Attempt{Outcome: actors.OutcomeAnswer})}
			}}
			h, _ := newTestHandler(t, HandlerConfig{Pool: kind.wrap(pool)})
			q := withEDNS(newQuery("example.com.", dns.TypeA), 4096, true)
			q.AuthenticatedData = true
			m, _ := exchange(t, h, q, ProtoUDP)

			checkEcho(t, q, m)
			if !m.AuthenticatedData || m.Truncated {
				t.Errorf("header = %+v, want AD passed through and no truncation", m.MsgHdr)
			}
			if got := rrStrings(m.Answer); !slices.Equal(got, answer) {
				t.Errorf("answer =\n%q\nwant\n%q", got, answer)
			}
			if got := rrStrings(m.Ns); !slices.Equal(got, authority) {
				t.Errorf("authority =\n%q\nwant\n%q", got, authority)
			}
			opt := m.IsEdns0()
			if opt == nil || !opt.Do() || len(opt.Option) != 1 {
				t.Fatalf("answer OPT = %v, want the upstream's with DO and its NSID", opt)
			}
			if nsid, ok := opt.Option[0].(*dns.EDNS0_NSID); !ok || nsid.Nsid != "6e73312e6578616d706c65" {
				t.Errorf("OPT option = %v, want the upstream's NSID", opt.Option[0])
			}
			if opt.UDPSize() != dnsmsg.EDNSSize {
				t.Errorf("OPT UDP size = %d, want ours (%d): it is hop-by-hop", opt.UDPSize(), dnsmsg.EDNSSize)
			}
		})
	}
}

func TestServePoolOPTFollowsTheClient(t *testing.T) {
	t.Parallel()
	for _, kind := range poolKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			tests := []struct {
				name       string
				clientEDNS bool
				clientDO   bool
				answerOPT  bool
				rcode      int
				wantOPT    bool
				wantDO     bool
			}{
				{name: "client without EDNS, upstream with", answerOPT: true, wantOPT: false},
				{name: "client with EDNS and DO, upstream without", clientEDNS: true, clientDO: true, wantOPT: true, wantDO: true},
				{name: "client with EDNS, upstream without", clientEDNS: true, wantOPT: true},
				{name: "extended rcode keeps the OPT", answerOPT: true, rcode: dns.RcodeBadCookie, wantOPT: true},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					pool := &fakePool{OnExchange: func(_ context.Context, q *dns.Msg, _ []actors.Attempt) actors.Result {
						m := new(dns.Msg)
						m.SetRcode(q, tt.rcode)
						m.Extra = mustRRs(t, "ns1.example.com. 60 IN A 192.0.2.53")
						if tt.answerOPT {
							m.SetEdns0(1232, false)
						}
						return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "primary"}
					}}
					h, _ := newTestHandler(t, HandlerConfig{Pool: kind.wrap(pool)})
					q := newQuery("example.com.", dns.TypeNS)
					if tt.clientEDNS {
						withEDNS(q, 1232, tt.clientDO)
					}
					m, _ := exchange(t, h, q, ProtoUDP)
					if kind.name == "bytes" && pool.Raws() != 1 {
						t.Errorf("the answer did not take the byte path")
					}
					opt := m.IsEdns0()
					if (opt != nil) != tt.wantOPT || (opt != nil && opt.Do() != tt.wantDO) {
						t.Errorf("answer OPT = %v, want present %v with DO %v", opt, tt.wantOPT, tt.wantDO)
					}
					if m.Rcode != tt.rcode {
						t.Errorf("rcode = %d, want %d", m.Rcode, tt.rcode)
					}
					if len(m.Extra) == 0 || m.Extra[0].Header().Rrtype != dns.TypeA {
						t.Errorf("additional = %v, want the upstream's A record kept", m.Extra)
					}
				})
			}
		})
	}
}

func TestServePoolRcodesPassThrough(t *testing.T) {
	t.Parallel()
	for _, kind := range poolKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			for _, rcode := range []int{dns.RcodeNameError, dns.RcodeServerFailure, dns.RcodeRefused} {
				pool := &fakePool{OnExchange: func(_ context.Context, q *dns.Msg, _ []actors.Attempt) actors.Result {
					m := new(dns.Msg)
					m.SetRcode(q, rcode)
					m.Ns = mustRRs(t, "example.com. 900 IN SOA ns.example.com. host.example.com. 1 7200 3600 1209600 900")
					return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "secondary"}
				}}
				h, rec := newTestHandler(t, HandlerConfig{Pool: kind.wrap(pool)})
				m, _ := exchange(t, h, newQuery("nope.example.com.", dns.TypeA), "tcp")
				if m.Rcode != rcode || len(m.Ns) != 1 {
					t.Errorf("upstream %s: client got %s with %d authority records, want it as it was",
						dns.RcodeToString[rcode], dns.RcodeToString[m.Rcode], len(m.Ns))
				}
				if e := rec.only(t); e.Rcode != rcode || e.Upstream != "secondary" || e.PoolErr != nil {
					t.Errorf("upstream %s: entry %+v", dns.RcodeToString[rcode], e)
				}
			}
		})
	}
}

// A query the pool refused for its client's share of the slots is answered
// REFUSED, with no failure remembered for the name: the verdict is on the
// client, and another client's query for it goes to the pool. The pool is
// told the client's address (without its port). Before, the answer was
// SERVFAIL and the name's failure was remembered for failure_ttl_s.
func TestShareRefusalIsRefusedAndNotRemembered(t *testing.T) {
	t.Parallel()
	pool := failingPool(actors.Result{Err: actors.ErrShareRefused})
	h, rec := newCachedHandler(t, pool, testCacheConfig())
	for i := range 2 {
		m, _ := exchange(t, h, newQuery("busy.example.", dns.TypeA), ProtoUDP)
		if m.Rcode != dns.RcodeRefused {
			t.Errorf("query %d: %s, want REFUSED", i, dns.RcodeToString[m.Rcode])
		}
		if e := rec.last(); e.Source != SourcePool || !errors.Is(e.PoolErr, actors.ErrShareRefused) {
			t.Errorf("query %d: source %q pool error %v, want pool and the share refusal", i, e.Source, e.PoolErr)
		}
	}
	// With EDNS the refusal says why (spec 3: every answer nxdnsd makes
	// itself carries an EDE).
	m, _ := exchange(t, h, withEDNS(newQuery("busy.example.", dns.TypeA), 1232, false), ProtoUDP)
	if es := ede(m); m.Rcode != dns.RcodeRefused || len(es) != 1 || es[0].InfoCode != dns.ExtendedErrorCodeOther || es[0].ExtraText != edeShareText {
		t.Errorf("with EDNS: %s, EDE %v; want REFUSED with EDE 0 %q", dns.RcodeToString[m.Rcode], es, edeShareText)
	}
	if pool.Calls() != 3 {
		t.Errorf("the pool saw %d queries, want 3: nothing remembered", pool.Calls())
	}
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if pool.client != testClient.Addr() {
		t.Errorf("the pool was told client %v, want %v", pool.client, testClient.Addr())
	}
}
