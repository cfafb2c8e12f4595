package query

import (
	"strings"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/wire/transport"
)

// nameClient gives the entry its client's name when the client gave
// none itself (a DoH path's): the one HandlerConfig.Clients knows (spec
// section 15), or none. It never waits: the directory answers with one
// atomic load and a map lookup, and a PTR lookup it starts for a new
// private address runs beside the query (its later queries carry the
// name).
func (h *Handler) nameClient(e *Entry) {
	if e.ClientName == "" && h.clients != nil && e.Client.IsValid() {
		e.ClientName = h.clients.Name(e.Client.Addr())
	}
}

// ZoneClient returns the exchanger of the forward zone that covers name
// (the longest match, as a query for name finds it), or nil when none
// does: the directory's PTR lookups go there, never to the pool
// (clients.ZoneLookup).
func (h *Handler) ZoneClient(name string) transport.Exchanger {
	if z := h.zones.match(strings.ToLower(dns.Fqdn(name))); z != nil {
		return z.Client
	}
	return nil
}
