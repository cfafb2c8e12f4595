package query

import (
	"context"
	"fmt"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// Upstreams are asked with nxdnsd's own EDNS size, 1232, whatever the
// client's: over UDP and TCP, on the common parse path and the general one
// (an option sends a query there), in the message and in the bytes a
// transport sends (issue 16: a client's 4096 or 8192 went upstream as it
// was). Before the fix every case but 1232 forwarded the client's size.
func TestServeAdvertisesItsOwnSizeUpstream(t *testing.T) {
	t.Parallel()
	for _, size := range []uint16{512, 1232, 4096, 8192} {
		for _, proto := range []string{ProtoUDP, "tcp"} {
			for _, general := range []bool{false, true} {
				name := fmt.Sprintf("%s/%d/general=%v", proto, size, general)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					pool := answeringPool(t, "example.com. 60 IN A 192.0.2.1")
					h, _ := newTestHandler(t, HandlerConfig{Pool: pool})
					q := withEDNS(newQuery("example.com.", dns.TypeA), size, true)
					if general {
						opt := q.IsEdns0()
						opt.Option = append(opt.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
					}
					exchange(t, h, q, proto)

					packed := new(dns.Msg)
					if err := packed.Unpack(pool.LastPacked()); err != nil {
						t.Fatalf("the packed query does not parse: %v", err)
					}
					for _, f := range []struct {
						form string
						up   *dns.Msg
					}{{"Msg", pool.Last()}, {"Packed", packed}} {
						opt := f.up.IsEdns0()
						if opt == nil || opt.UDPSize() != dnsmsg.EDNSSize || !opt.Do() {
							t.Errorf("%s: forwarded OPT = %v, want UDP size %d and DO kept", f.form, opt, dnsmsg.EDNSSize)
						}
					}
				})
			}
		}
	}
}

// signedMX is an answer like `secure.test MX +dnssec` from a validating
// upstream: two MX records and their RRSIG in the answer (about 300 bytes),
// and the exchangers' addresses with their RRSIGs in the additional
// section (another 600): whole, it fits 1232 but not 512.
func signedMX(tb testing.TB) (answer, extra []dns.RR) {
	tb.Helper()
	sig := func(owner, covered string) string {
		return fmt.Sprintf("%s 300 IN RRSIG %s 13 2 300 20300101000000 20200101000000 12345 secure.test. %s",
			owner, covered, "MEUCIQDyJ3hW6r5p3F0YVj8h1b2l9vS1nR1cV7Wl8zA0aB9n2wIgc3X4m5Y6n7Q8r9S0t1U2v3W4x5Y6z7A8b9C0d1E2f3g=")
	}
	answer = mustRRs(tb,
		"secure.test. 300 IN MX 10 mx1.secure.test.",
		"secure.test. 300 IN MX 20 mx2.secure.test.",
		sig("secure.test.", "MX"))
	extra = mustRRs(tb,
		"mx1.secure.test. 300 IN A 192.0.2.25",
		sig("mx1.secure.test.", "A"),
		"mx1.secure.test. 300 IN AAAA 2001:db8::25",
		sig("mx1.secure.test.", "AAAA"),
		"mx2.secure.test. 300 IN A 192.0.2.26",
		sig("mx2.secure.test.", "A"),
		"mx2.secure.test. 300 IN AAAA 2001:db8::26",
		sig("mx2.secure.test.", "AAAA"))
	return answer, extra
}

// mxPool answers every query with signedMX. With honour set it behaves as
// an upstream over UDP does (RFC 2181 section 9): when the whole answer
// exceeds the size the query advertised, it drops additional records to
// fit, without TC.
func mxPool(tb testing.TB, honour bool) *fakePool {
	answer, extra := signedMX(tb)
	return &fakePool{OnExchange: func(_ context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result {
		m := new(dns.Msg)
		m.SetReply(q)
		m.RecursionAvailable, m.AuthenticatedData = true, true
		for _, rr := range answer {
			m.Answer = append(m.Answer, dns.Copy(rr))
		}
		for _, rr := range extra {
			m.Extra = append(m.Extra, dns.Copy(rr))
		}
		if o := q.IsEdns0(); o != nil {
			m.SetEdns0(dnsmsg.EDNSSize, o.Do())
		}
		if honour {
			m.Truncate(dnsmsg.ClientUDPSize(q))
			m.Truncated = false // only additional records went
		}
		trail = append(trail, actors.Attempt{Upstream: "primary", Outcome: actors.OutcomeAnswer})
		return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "primary", Attempts: trail}
	}}
}

// An answer that fits the client's UDP size but for additional records
// loses some of those and is not truncated (RFC 2181 section 9): the
// `secure.test MX +bufsize=512 +dnssec` case of issue 16, where nxdnsd set
// TC and the client retried over TCP for nothing. Before the fix TC was
// set on both paths.
func TestServeDropsAdditionalRecordsWithoutTC(t *testing.T) {
	t.Parallel()
	for _, kind := range poolKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			h, _ := newTestHandler(t, HandlerConfig{Pool: kind.wrap(mxPool(t, false))})
			q := withEDNS(newQuery("secure.test.", dns.TypeMX), 512, true)
			m, out := exchange(t, h, q, ProtoUDP)
			if len(out) > 512 {
				t.Errorf("answer is %d bytes, want at most 512", len(out))
			}
			if m.Truncated {
				t.Errorf("TC set, but only additional records were left out")
			}
			answer, extra := signedMX(t)
			if len(m.Answer) != len(answer) {
				t.Errorf("answer section has %d records, want all %d", len(m.Answer), len(answer))
			}
			if got := len(m.Extra) - 1; got >= len(extra) || m.IsEdns0() == nil || !m.IsEdns0().Do() {
				t.Errorf("additional section: %d records and OPT %v, want fewer than %d and the OPT with DO", got, m.IsEdns0(), len(extra))
			}
		})
	}
}

// An answer whose answer section does not fit is still truncated with TC,
// and so is one that loses an authority record.
func TestServeTCWhenAnswerOrAuthorityRecordsGo(t *testing.T) {
	t.Parallel()
	answer, _ := signedMX(t)
	for _, section := range []string{"answer", "authority"} {
		t.Run(section, func(t *testing.T) {
			t.Parallel()
			pool := &fakePool{OnExchange: func(_ context.Context, q *dns.Msg, trail []actors.Attempt) actors.Result {
				m := new(dns.Msg)
				m.SetReply(q)
				rrs := make([]dns.RR, 0, 4*len(answer))
				for range 4 {
					for _, rr := range answer {
						rrs = append(rrs, dns.Copy(rr))
					}
				}
				if section == "answer" {
					m.Answer = rrs
				} else {
					m.Answer = []dns.RR{dns.Copy(answer[0])}
					m.Ns = rrs
				}
				m.SetEdns0(dnsmsg.EDNSSize, true)
				return actors.Result{Answer: transport.Answer{Msg: m}, Upstream: "primary", Attempts: trail}
			}}
			h, _ := newTestHandler(t, HandlerConfig{Pool: pool})
			m, out := exchange(t, h, withEDNS(newQuery("secure.test.", dns.TypeMX), 512, true), ProtoUDP)
			if len(out) > 512 || !m.Truncated {
				t.Errorf("%d bytes, TC %v: want at most 512 with TC", len(out), m.Truncated)
			}
		})
	}
}

// A client on TCP advertising EDNS 512 gets the whole answer, additional
// records included, from an upstream that fits its answers to the size it
// was asked with: nxdnsd asks with 1232, not the client's 512 (issue 16:
// the client lost the additional records behind a udp:// upstream). Before
// the fix the additional section came back cut.
func TestServeTCPClientWithSmallEDNSGetsAdditionalRecords(t *testing.T) {
	t.Parallel()
	for _, kind := range poolKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			h, _ := newTestHandler(t, HandlerConfig{Pool: kind.wrap(mxPool(t, true))})
			m, _ := exchange(t, h, withEDNS(newQuery("secure.test.", dns.TypeMX), 512, true), "tcp")
			answer, extra := signedMX(t)
			if m.Truncated || len(m.Answer) != len(answer) || len(m.Extra) != len(extra)+1 {
				t.Errorf("TC %v, %d answer and %d additional records; want no TC, %d and %d and the OPT",
					m.Truncated, len(m.Answer), len(m.Extra), len(answer), len(extra))
			}
		})
	}
}

// A client advertising more than 1232 bytes gets at most 1232 over UDP,
// truncated with TC beyond: an answer of 1.6 KB no longer goes back whole
// to a client that said 4096 (issue 16: 68x amplification).
func TestServeCapsUDPAnswersAt1232(t *testing.T) {
	t.Parallel()
	for _, size := range []uint16{1232, 1400, 4096, 65535} {
		for _, kind := range poolKinds {
			t.Run(fmt.Sprintf("%d/%s", size, kind.name), func(t *testing.T) {
				t.Parallel()
				h, _ := newTestHandler(t, HandlerConfig{Pool: kind.wrap(answeringPool(t, bigAnswer()...))})
				m, out := exchange(t, h, withEDNS(newQuery("big.example.", dns.TypeA), size, false), ProtoUDP)
				if len(out) > dnsmsg.EDNSSize || !m.Truncated || len(m.Answer) == 0 {
					t.Errorf("%d bytes, TC %v, %d records: want at most %d bytes with TC and some records",
						len(out), m.Truncated, len(m.Answer), dnsmsg.EDNSSize)
				}
			})
		}
	}
}
