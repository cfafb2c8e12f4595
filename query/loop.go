package query

import (
	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/actors"
)

// special is the special-use names (special.go) with the upstream actors'
// loop checks in front (actors/loop.go; docs/operations.md, "Forwarding
// loops"). A name of this process's checks come back as a client query is
// answered like any name under invalid.: NXDOMAIN, at once, never
// forwarded, so a loop carries it round once and no more; when it is a
// check the upstream it was sent through is still waiting for, Seen has
// reported it first. Another nxdnsd's check is not answered here but
// forwarded like any name, so that a loop through this nxdnsd is found by
// the one that sent it.
//
// Every check's name has the same length: other queries pay one
// comparison of lengths. Every name under the checks' zone is marked in e
// (Entry.LoopCheck): it is kept out of the query log and the recent
// queries. A name of another length is found in the special-use names'
// answer for invalid., which other queries never reach.
func (h *Handler) special(r *request, e *Entry) *dns.Msg {
	if len(r.lname) == actors.LoopCheckLen && h.loops != nil {
		switch h.loops.Seen(r.lname) {
		case actors.ForeignLoopCheck:
			e.LoopCheck = true
			return nil
		case actors.OwnLoopCheck:
			e.LoopCheck = true
		}
	}
	m := r.special()
	if m != nil && !e.LoopCheck && inLoopCheckZone(r.lname) {
		e.LoopCheck = true
	}
	return m
}

// inLoopCheckZone reports whether name, in lower case and fully
// qualified, is the loop checks' zone or a name under it.
func inLoopCheckZone(name string) bool {
	const zone = actors.LoopCheckZone
	return name == zone || len(name) > len(zone) && name[len(name)-len(zone)-1] == '.' && name[len(name)-len(zone):] == zone
}
