package query

import (
	"context"
	"fmt"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/cache"
	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// Zone is one forward zone: queries at or below Name go to one resolver
// (spec section 5), never to the pool.
type Zone struct {
	// Name is the zone's apex, a domain name; it is matched without regard
	// to case.
	Name string

	// Resolver is the resolver's address (IP:PORT), as the query log names
	// it.
	Resolver string

	// Client exchanges with the resolver. It bounds each exchange itself
	// (read_timeout_ms); its expiry errors mean a timeout of that resolver.
	// The answers it returns become the query path's, which modifies them
	// (ID, question, OPT size) before packing. The query it is given is
	// valid only during the call.
	Client transport.Exchanger
}

// zoneTable holds the forward zones by lower-case apex.
type zoneTable map[string]*Zone

func newZoneTable(zones []Zone) (zoneTable, error) {
	t := make(zoneTable, len(zones))
	for i, z := range zones {
		name, err := canonicalName(z.Name)
		if err != nil {
			return nil, fmt.Errorf("%w %d: %v", ErrBadZone, i, err)
		}
		if z.Client == nil {
			return nil, fmt.Errorf("%w %d: %s has no client", ErrBadZone, i, name)
		}
		if _, dup := t[name]; dup {
			return nil, fmt.Errorf("%w %d: %s is listed twice", ErrBadZone, i, name)
		}
		z.Name = name
		t[name] = &z
	}
	return t, nil
}

// match returns the zone with the longest apex that is lname or one of its
// ancestors, label by label (lan. holds nas.lan. and lan. but not xlan.),
// or nil. lname is lower case and fully qualified.
func (t zoneTable) match(lname string) *Zone {
	if len(t) == 0 {
		return nil
	}
	// Dropping labels from the left visits the suffixes longest first, so
	// the first hit is the longest match. Each probe is a substring: no
	// allocation.
	for off := 0; ; {
		if z := t[lname[off:]]; z != nil {
			return z
		}
		next, end := dns.NextLabel(lname, off)
		if end {
			break
		}
		off = next
	}
	return t["."]
}

// forward answers r, packed as q, through zone z's resolver. Its answer
// goes to the client as it is, rcode included; a failed exchange answers
// SERVFAIL. It fills the entry's source, resolver and zone outcome. With a
// cache key k (nil: no cache) the answer is stored, or the failure
// remembered.
func (h *Handler) forward(ctx context.Context, r *request, z *Zone, q *transport.Query, e *Entry, k *cache.Key) (*dns.Msg, []byte, int) {
	e.Source, e.Upstream, e.Zone = SourceForwardZone, z.Resolver, z.Name
	a, err := z.Client.Exchange(ctx, q, time.Time{}) // the client bounds it with its read timeout
	switch {
	case err == nil && (a.Msg != nil || a.Raw != nil):
		e.ZoneOutcome = ZoneAnswer
		if k != nil {
			h.store(*k, a, e.Time)
		}
		return r.answer(q, a)
	case transport.IsTimeout(err):
		// The forward.Client says so with ErrResolverTimeout; a deadline
		// noticed by any other layer (another Exchanger, the caller's
		// context) counts the same.
		e.ZoneOutcome = ZoneTimeout
	default:
		e.ZoneOutcome = ZoneError
	}
	if k != nil {
		h.remember(ctx, *k, err, e.Time)
	}
	return r.zoneFailure(z.Resolver, e.ZoneOutcome), nil, 0
}
