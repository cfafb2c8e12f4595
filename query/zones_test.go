package query

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

func TestZoneMatch(t *testing.T) {
	t.Parallel()
	lanZones, err := newZoneTable([]Zone{
		{Name: "lan.", Client: resolverAnswering(t, 0)},
		{Name: "IoT.Lan", Client: resolverAnswering(t, 0)},
		{Name: "168.192.in-addr.arpa.", Client: resolverAnswering(t, 0)},
	})
	if err != nil {
		t.Fatal(err)
	}
	rootZones, err := newZoneTable([]Zone{
		{Name: ".", Client: resolverAnswering(t, 0)},
		{Name: "lan.", Client: resolverAnswering(t, 0)},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		zones zoneTable
		name  string
		want  string // "" for no zone
	}{
		{lanZones, "cam.iot.lan.", "iot.lan."},
		{lanZones, "a.b.cam.iot.lan.", "iot.lan."},
		{lanZones, "iot.lan.", "iot.lan."},
		{lanZones, "nas.lan.", "lan."},
		{lanZones, "lan.", "lan."},
		{lanZones, "xiot.lan.", "lan."},
		{lanZones, "xlan.", ""},
		{lanZones, "lan.example.", ""},
		{lanZones, `nas\.lan.`, ""}, // one label at the root
		{lanZones, ".", ""},
		{lanZones, "10.1.168.192.in-addr.arpa.", "168.192.in-addr.arpa."},
		{lanZones, "10.1.169.192.in-addr.arpa.", ""},
		{rootZones, "example.com.", "."},
		{rootZones, ".", "."},
		{rootZones, "nas.lan.", "lan."},
		{zoneTable{}, "nas.lan.", ""},
	}
	for _, tt := range tests {
		got := ""
		if z := tt.zones.match(tt.name); z != nil {
			got = z.Name
		}
		if got != tt.want {
			t.Errorf("match(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// timeoutError is a net.Error that timed out, as a socket read reports.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

var _ net.Error = timeoutError{}

func TestServeForwardZones(t *testing.T) {
	t.Parallel()
	const camA = "cam.iot.lan.\t60\tIN\tA\t192.168.2.5"
	tests := []struct {
		name     string
		qname    string
		lan, iot *countingExchanger // nil: a resolver that must not be asked
		rcode    int
		answer   []string
		zone     string // "" when the pool answers
		resolver string
		outcome  string
	}{
		{name: "longest suffix", qname: "Cam.IoT.lan.",
			iot:   resolverAnswering(t, dns.RcodeSuccess, camA),
			rcode: dns.RcodeSuccess, answer: []string{camA},
			zone: "iot.lan.", resolver: "192.168.2.1:53", outcome: ZoneAnswer},
		{name: "shorter suffix", qname: "nas.lan.",
			lan:   resolverAnswering(t, dns.RcodeSuccess, "nas.lan. 60 IN A 192.168.1.10"),
			rcode: dns.RcodeSuccess, answer: []string{"nas.lan.\t60\tIN\tA\t192.168.1.10"},
			zone: "lan.", resolver: "192.168.1.1:53", outcome: ZoneAnswer},
		{name: "the zone apex", qname: "lan.",
			lan:   resolverAnswering(t, dns.RcodeSuccess),
			rcode: dns.RcodeSuccess,
			zone:  "lan.", resolver: "192.168.1.1:53", outcome: ZoneAnswer},
		{name: "NXDOMAIN passed through", qname: "gone.lan.",
			lan:   resolverAnswering(t, dns.RcodeNameError),
			rcode: dns.RcodeNameError,
			zone:  "lan.", resolver: "192.168.1.1:53", outcome: ZoneAnswer},
		{name: "REFUSED passed through", qname: "nas.lan.",
			lan:   resolverAnswering(t, dns.RcodeRefused),
			rcode: dns.RcodeRefused,
			zone:  "lan.", resolver: "192.168.1.1:53", outcome: ZoneAnswer},
		{name: "resolver timeout", qname: "nas.lan.",
			lan:   resolverFailing(fmt.Errorf("forwarding to 192.168.1.1:53: %w: i/o timeout", transport.ErrResolverTimeout)),
			rcode: dns.RcodeServerFailure,
			zone:  "lan.", resolver: "192.168.1.1:53", outcome: ZoneTimeout},
		{name: "deadline of another layer", qname: "nas.lan.",
			lan:   resolverFailing(context.DeadlineExceeded),
			rcode: dns.RcodeServerFailure,
			zone:  "lan.", resolver: "192.168.1.1:53", outcome: ZoneTimeout},
		{name: "socket timeout", qname: "nas.lan.",
			lan:   resolverFailing(&net.OpError{Op: "read", Net: "udp", Err: timeoutError{}}),
			rcode: dns.RcodeServerFailure,
			zone:  "lan.", resolver: "192.168.1.1:53", outcome: ZoneTimeout},
		{name: "resolver error", qname: "cam.iot.lan.",
			iot:   resolverFailing(errors.New("connection refused")),
			rcode: dns.RcodeServerFailure,
			zone:  "iot.lan.", resolver: "192.168.2.1:53", outcome: ZoneError},
		{name: "cancelled", qname: "nas.lan.",
			lan:   resolverFailing(context.Canceled),
			rcode: dns.RcodeServerFailure,
			zone:  "lan.", resolver: "192.168.1.1:53", outcome: ZoneError},
		{name: "not label-wise below", qname: "xlan.", rcode: dns.RcodeSuccess},
	}
	for _, tt := range tests {
		for _, bytes := range []bool{false, true} {
			name := tt.name + "/msg"
			if bytes {
				name = tt.name + "/bytes"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				// A resolver of its own for each subtest, counting its calls.
				own := func(c *countingExchanger) *countingExchanger {
					if c != nil {
						return &countingExchanger{fn: c.fn}
					}
					return resolverFailing(errors.New("this resolver must not be asked"))
				}
				lan, iot := own(tt.lan), own(tt.iot)
				var raws atomic.Int64
				client := func(c *countingExchanger) transport.Exchanger {
					if bytes {
						return byteZone{c, &raws}
					}
					return c
				}
				pool := answeringPool(t)
				h, rec := newTestHandler(t, HandlerConfig{
					Pool: pool,
					Zones: []Zone{
						{Name: "lan.", Resolver: "192.168.1.1:53", Client: client(lan)},
						{Name: "iot.lan.", Resolver: "192.168.2.1:53", Client: client(iot)},
					},
				})
				q := withEDNS(newQuery(tt.qname, dns.TypeA), 1232, true)
				m, _ := exchange(t, h, q, ProtoUDP)
				checkEcho(t, q, m)
				// LayoutAnswer leaves a REFUSED to be parsed.
				if bytes && tt.outcome == ZoneAnswer && tt.rcode != dns.RcodeRefused && raws.Load() != 1 {
					t.Errorf("the answer did not take the byte path")
				}
				if m.Rcode != tt.rcode {
					t.Errorf("rcode = %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tt.rcode])
				}
				if got := rrStrings(m.Answer); !slices.Equal(got, tt.answer) {
					t.Errorf("answer =\n%q\nwant\n%q", got, tt.answer)
				}
				if opt := m.IsEdns0(); opt == nil || !opt.Do() {
					t.Errorf("answer OPT = %v, want one with DO", opt)
				}
				asked := 0
				if tt.zone != "" {
					asked = 1
				}
				if got := lan.Calls() + iot.Calls(); got != asked || pool.Calls() != 1-asked {
					t.Errorf("resolvers asked %d times, pool %d; want %d and %d", got, pool.Calls(), asked, 1-asked)
				}
				e := rec.only(t)
				if tt.zone == "" {
					if e.Source != SourcePool || e.Zone != "" || e.ZoneOutcome != "" {
						t.Errorf("entry = %+v, want a pool entry without zone", e)
					}
					return
				}
				if e.Source != SourceForwardZone || e.Zone != tt.zone || e.Upstream != tt.resolver || e.ZoneOutcome != tt.outcome || e.Rcode != tt.rcode {
					t.Errorf("entry: source %q zone %q upstream %q outcome %q rcode %d; want forward_zone %q %q %q %d",
						e.Source, e.Zone, e.Upstream, e.ZoneOutcome, e.Rcode, tt.zone, tt.resolver, tt.outcome, tt.rcode)
				}
			})
		}
	}
}

// The resolver sees the client's question as written, RD and the client's
// OPT, in the message and in the bytes packed once for every resolver; the
// context of ServeDNS reaches it, and no expiry: the zone's client applies
// its own read timeout.
func TestServeForwardZoneQuery(t *testing.T) {
	t.Parallel()
	type ctxKey struct{}
	var sawValue any
	lan := &countingExchanger{fn: func(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
		sawValue = ctx.Value(ctxKey{})
		m := new(dns.Msg)
		m.SetReply(q)
		return m, nil
	}}
	h, _ := newTestHandler(t, HandlerConfig{Zones: []Zone{{Name: "lan.", Resolver: "192.168.1.1:53", Client: lan}}})
	q := withEDNS(newQuery("NAS.lan.", dns.TypeAAAA), 1232, true)
	raw := mustPack(t, q)
	ctx := context.WithValue(context.Background(), ctxKey{}, "serve's")
	if out := serve(ctx, h, raw, "tcp"); out == nil {
		t.Fatal("ServeDNS dropped the query")
	}
	if sawValue != "serve's" {
		t.Errorf("the resolver's context carried %v, want ServeDNS's", sawValue)
	}
	if !lan.lastExpiry.IsZero() {
		t.Errorf("the resolver was given expiry %v, want none", lan.lastExpiry)
	}
	packed := new(dns.Msg)
	if err := packed.Unpack(lan.lastPacked); err != nil {
		t.Fatalf("the packed query does not parse: %v", err)
	}
	for _, up := range []struct {
		form string
		m    *dns.Msg
	}{{"Msg", lan.last}, {"Packed", packed}} {
		if up.m.Question[0] != q.Question[0] || !up.m.RecursionDesired {
			t.Errorf("%s: forwarded %v (RD %v), want the client's question with RD", up.form, up.m.Question, up.m.RecursionDesired)
		}
		if opt := up.m.IsEdns0(); opt == nil || !opt.Do() {
			t.Errorf("%s: forwarded OPT = %v, want the client's with DO", up.form, opt)
		}
	}
}
