package query

import (
	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
)

// special is the special-use names (special.go) with the upstream actors'
// loop checks in front (actors/loop.go; docs/operations.md, "Forwarding
// loops"). A check of this process's, come back as a client query, is
// reported to the upstream it was sent through, then answered like any
// name under invalid.: NXDOMAIN, at once, never forwarded, so a loop
// carries it round once and no more. Another nxdnsd's check is not
// answered here but forwarded like any name, so that a loop through this
// nxdnsd is found by the one that sent it.
//
// Every check's name has the same length: other queries pay one
// comparison of lengths.
func (h *Handler) special(r *request) *dns.Msg {
	if len(r.lname) == actors.LoopCheckLen && h.loops != nil && h.loops.Seen(r.lname) == actors.ForeignLoopCheck {
		return nil
	}
	return r.special()
}
