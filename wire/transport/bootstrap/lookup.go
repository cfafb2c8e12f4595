package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// maxChain bounds the CNAMEs followed from the host to its addresses.
const maxChain = 8

// lookup asks the sources for host's addresses, one after another, each
// given an equal share of the time left before ctx's deadline (or
// transport.DefaultLookupTimeout), so that one source that stalls leaves time
// for the next. Its error names what each source said.
func (r *Resolver) lookup(ctx context.Context, host string) (transport.Resolved, error) {
	sources := r.Sources()
	if len(sources) == 0 {
		return transport.Resolved{}, errNoSources
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, transport.DefaultLookupTimeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	var failed []string
	for i, s := range sources {
		start := r.now()
		expiry := time.Now().Add(time.Until(deadline) / time.Duration(len(sources)-i))
		addrs, ttl, err := ask(ctx, s.Exchanger, host, expiry)
		if err == nil {
			return transport.Resolved{Addrs: addrs, Until: start.Add(min(max(ttl, MinTTL), MaxTTL))}, nil
		}
		failed = append(failed, fmt.Sprintf("%s: %v", s.Name, err))
		if ctx.Err() != nil {
			break
		}
	}
	return transport.Resolved{}, errors.New(strings.Join(failed, "; "))
}

// answer is what one question found.
type answer struct {
	addrs []netip.Addr
	ttl   time.Duration // the least TTL of the records that led to addrs
	err   error
}

// ask asks x for host's A and AAAA records at once, and returns their
// addresses, IPv4 first, with the least TTL of the records that gave
// them; an error when neither question found one.
func ask(ctx context.Context, x transport.Exchanger, host string, expiry time.Time) ([]netip.Addr, time.Duration, error) {
	var six answer
	done := make(chan struct{})
	go func() {
		defer close(done)
		six = question(ctx, x, host, dns.TypeAAAA, expiry)
	}()
	four := question(ctx, x, host, dns.TypeA, expiry)
	<-done

	var addrs []netip.Addr
	ttl := MaxTTL
	for _, a := range []answer{four, six} {
		if len(a.addrs) > 0 {
			addrs = append(addrs, a.addrs...)
			ttl = min(ttl, a.ttl)
		}
	}
	if len(addrs) == 0 {
		return nil, 0, fmt.Errorf("%w; %w", four.err, six.err)
	}
	return addrs, ttl, nil
}

// question asks x for host's records of qtype, A or AAAA, by expiry.
func question(ctx context.Context, x transport.Exchanger, host string, qtype uint16, expiry time.Time) answer {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(host), qtype)
	m.SetEdns0(dnsmsg.EDNSSize, false)
	q, err := transport.NewQuery(m)
	if err != nil {
		return answer{err: err}
	}
	a, err := x.Exchange(ctx, q, expiry)
	if err != nil {
		return answer{err: err}
	}
	r := a.Msg
	if r == nil {
		r = new(dns.Msg)
		if err := r.Unpack(a.Raw); err != nil {
			return answer{err: fmt.Errorf("%w: %w", transport.ErrMalformed, err)}
		}
	}
	if r.Rcode != dns.RcodeSuccess {
		return answer{err: fmt.Errorf("%s %s: %s", dns.TypeToString[qtype], host, dns.RcodeToString[r.Rcode])}
	}
	addrs, ttl := follow(r.Answer, dns.Fqdn(host), qtype)
	if len(addrs) == 0 {
		return answer{err: fmt.Errorf("%s %s: no address", dns.TypeToString[qtype], host)}
	}
	return answer{addrs: addrs, ttl: ttl}
}

// follow returns the addresses of type qtype that rrs give name, through
// its CNAMEs, with the least TTL of the records on the way. Unspecified
// addresses (a blocker's answer) are no addresses.
func follow(rrs []dns.RR, name string, qtype uint16) ([]netip.Addr, time.Duration) {
	var addrs []netip.Addr
	ttl := MaxTTL
	for range maxChain {
		next := ""
		for _, rr := range rrs {
			h := rr.Header()
			if !strings.EqualFold(h.Name, name) {
				continue
			}
			var ip netip.Addr
			switch rr := rr.(type) {
			case *dns.A:
				ip, _ = netip.AddrFromSlice(rr.A.To4())
			case *dns.AAAA:
				ip, _ = netip.AddrFromSlice(rr.AAAA.To16())
			case *dns.CNAME:
				next = rr.Target
				ttl = min(ttl, time.Duration(h.Ttl)*time.Second)
				continue
			default:
				continue
			}
			if h.Rrtype != qtype || !ip.IsValid() || ip.IsUnspecified() {
				continue
			}
			addrs = append(addrs, ip)
			ttl = min(ttl, time.Duration(h.Ttl)*time.Second)
		}
		if len(addrs) > 0 || next == "" {
			break
		}
		name = next
	}
	return addrs, ttl
}
