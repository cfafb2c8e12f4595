package query

import (
	"encoding/binary"
	"net/netip"

	"github.com/miekg/dns"

	"github.com/nxdnsd/nxdnsd/blocking"
	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"
)

// Blocking on the query path (spec section 11): step 3 decides on the
// name asked (answerBlocked), step 8 on the CNAME and DNAME targets of
// an answer, fresh or cached (inspect). The cache holds the upstreams'
// answers as they came, for every client: blocking is decided per client
// on the way out. A blocked answer is built here as bytes, in the
// listener's buffer, like a cache hit's.

// maxNameLen is the longest name in wire format (RFC 1035 section 3.1).
const maxNameLen = 255

// edeBlocked is EDE 15, Blocked (RFC 8914 section 4.16).
const edeBlocked = dns.ExtendedErrorCodeBlocked

// blockedText starts the EXTRA-TEXT of EDE 15; the list's name follows.
const blockedText = "blocked by "

// The SOA of a blocked NXDOMAIN or NODATA answer, owned by the name
// asked, so that a client caches the answer for answer_ttl_s (RFC 2308:
// the smaller of the SOA's TTL and its MINIMUM, both answer_ttl_s).
var (
	blockedMName = []byte("\x06nxdnsd\x07invalid\x00")
	blockedRName = []byte("\x06nobody\x07invalid\x00")
)

// answerBlocked is step 3: a name blocked for this client gets the
// blocked answer, and no upstream is asked. An allow rule for the name
// exempts its answer from CNAME inspection (s.allowed). With no rule in
// force it costs one atomic load.
//
// With the cache on, the step looks the query up in the cache first
// (lookUp: the cache's step uses what it found): a cached name that the
// rules in force were found to name nothing of (cache.Hit.NamesNothing)
// needs no decision. A million rules are far more memory than a
// processor's caches hold, and each suffix of a name probes a random
// line of it; the note on the entry spares a hit those probes, and the
// rules' memory of what they blocked (blocking/memo.go, keyed by the
// cache's hash of the question) spares a blocked name asked again.
func (h *Handler) answerBlocked(s *scratch) (*dns.Msg, []byte, int, bool) {
	if h.block.Idle() {
		return nil, nil, 0, false
	}
	rules := h.block.Rules()
	if h.cache.Cache != nil {
		h.lookUp(s)
		if s.hit.NamesNothing(rules.Serial()) {
			return nil, nil, 0, false
		}
	}
	return h.decideBlocked(s, rules)
}

// decideBlocked decides on the name as the client wrote it, or, when its
// question holds a compression pointer, as decidePacked packs it.
func (h *Handler) decideBlocked(s *scratch, rules blocking.Rules) (*dns.Msg, []byte, int, bool) {
	qname := s.req.plainName()
	if qname == nil {
		return h.decidePacked(s, rules)
	}
	return h.decideName(s, rules, qname)
}

// decidePacked is decideBlocked for a question that holds a pointer,
// with a buffer for the name packed (kept off decideBlocked's frame,
// where it would be zeroed for every query).
//
//go:noinline
func (h *Handler) decidePacked(s *scratch, rules blocking.Rules) (*dns.Msg, []byte, int, bool) {
	var name [maxNameLen]byte
	return h.decideName(s, rules, s.req.wireName(&name))
}

// decideName decides on qname with rules; a decision that no rule names
// qname is noted on its cache entry, if it has one (s.hit).
func (h *Handler) decideName(s *scratch, rules blocking.Rules, qname []byte) (*dns.Msg, []byte, int, bool) {
	var nb [clientNamesMax]string
	var d blocking.Decision
	// The client's names only when a group places clients by name: their
	// lookup (the directory, its PTR names) costs a hit more than the
	// decision does otherwise.
	var names []string
	if rules.NamesClients() {
		names = h.clientNames(s, nb[:0])
	}
	if s.looked {
		// The cache's hash of the question keys the rules' memory of
		// blocked decisions: a blocked name asked again is decided
		// without a look at the rules (blocking/memo.go).
		rules.DecideKeyed(&d, s.entry.Client.Addr(), names, qname, s.keyHash)
	} else {
		rules.DecideTo(&d, s.entry.Client.Addr(), names, qname)
	}
	s.allowed = d.Allowed
	if !d.Blocked {
		if d.NamesNothing() {
			s.hit.MarkNamesNothing(rules.Serial()) // nothing for a miss (the zero Hit)
		}
		return nil, nil, 0, false
	}
	out, rcode := s.req.blocked(d.Answer(), d.List, s.buf)
	s.entry.Source, s.entry.List = SourceBlocked, d.List
	return nil, out, rcode, true
}

// clientNamesMax is how many names of a client a decision takes without
// an allocation: a DoH path's and a few from the client names.
const clientNamesMax = 4

// clientNames appends to dst every name s's client has, for the groups
// that name clients (spec section 11: a client belongs to every group
// that names it, by address, prefix or client name): the DoH path's name
// it gave itself, then those the client names give its address
// (clients.Directory.Names, which may start a PTR lookup beside the
// query, never waiting for it).
func (h *Handler) clientNames(s *scratch, dst []string) []string {
	if n := s.entry.ClientName; n != "" {
		dst = append(dst, n) // the DoH path's, or the directory's first (again below: harmless)
	}
	if h.clients != nil && s.entry.Client.IsValid() {
		dst = h.clients.Names(s.entry.Client.Addr(), dst)
	}
	return dst
}

// inspect is step 8's CNAME inspection of an answer to s's query (a
// message m, or the bytes out and their rcode): when its CNAME or DNAME
// chain names a name blocked for this client, the client gets the
// blocked answer for the name it asked, naming the list that matched.
// Otherwise the answer goes as it is.
func (h *Handler) inspect(s *scratch, m *dns.Msg, out []byte, rcode int) (*dns.Msg, []byte, int) {
	if s.allowed || !h.block.Inspects() || !hasChain(m, out) {
		return m, out, rcode // nearly every answer holds no chain: nothing to decide
	}
	d, ok := h.decideChain(s, m, out)
	if !ok {
		return m, out, rcode
	}
	out, rcode = s.req.blocked(d.Answer(), d.List, s.buf)
	s.entry.Source, s.entry.List = SourceBlocked, d.List
	return nil, out, rcode
}

// chainMax is how many targets of a chain are decided at once; a longer
// chain is decided in parts.
const chainMax = 8

// chainBuf holds the targets of an answer's chain, expanded, while they
// are decided. A scratch keeps its chainBuf from one query to the next:
// only an answer with a CNAME or DNAME needs one.
type chainBuf struct {
	names [chainMax][maxNameLen]byte
	chain [chainMax][]byte
}

// decideChain collects the CNAME and DNAME targets of the answer (m, or
// the bytes out) and decides on them; ok reports a blocked decision.
func (h *Handler) decideChain(s *scratch, m *dns.Msg, out []byte) (d blocking.Decision, ok bool) {
	var name [maxNameLen]byte
	qname := s.req.wireName(&name) // passed along, not kept in c: c's decision is returned
	c := chainDecider{h: h, s: s, client: s.entry.Client.Addr()}
	if m != nil {
		for _, rr := range m.Answer {
			var target string
			switch rr := rr.(type) {
			case *dns.CNAME:
				target = rr.Target
			case *dns.DNAME:
				target = rr.Target
			default:
				continue
			}
			var b [maxNameLen]byte
			if end, err := dns.PackDomainName(dns.Fqdn(target), b[:], 0, nil, false); err == nil && c.add(b[:end], qname) {
				return c.d, c.d.Blocked
			}
		}
	} else if walkChain(out, &c, qname) {
		return c.d, c.d.Blocked
	}
	if c.n > 0 {
		c.decide(qname)
	}
	return c.d, c.d.Blocked
}

// chainDecider decides on an answer's chain, chainMax targets at a time.
type chainDecider struct {
	h      *Handler
	s      *scratch
	client netip.Addr
	n      int               // targets collected, not yet decided
	d      blocking.Decision // the last decision
}

// add collects target (copied), a target of qname's chain; it reports
// whether the decision is made.
func (c *chainDecider) add(target, qname []byte) bool {
	if c.s.cb == nil {
		c.s.cb = new(chainBuf)
	}
	cb := c.s.cb
	cb.chain[c.n] = append(cb.names[c.n][:0], target...)
	c.n++
	return c.n == chainMax && c.decide(qname)
}

// decide decides on the targets collected; it reports whether the
// decision is made: blocked, or the name asked allowed (exempt).
func (c *chainDecider) decide(qname []byte) bool {
	var nb [clientNamesMax]string
	c.d = c.h.block.DecideChain(c.client, c.h.clientNames(c.s, nb[:0]), qname, c.s.cb.chain[:c.n])
	c.n = 0
	return c.d.Blocked || c.d.Allowed
}

// walkChain hands c the target of each CNAME and DNAME record in the
// answer section of msg, the answer to qname, expanded (compression pointers followed), until
// the decision is made, and reports whether it was. It stops quietly at
// the first record it cannot read: the bytes came through the cache or
// the transport's checks, so that is a section cut short, and what was
// read is still decided on.
func walkChain(msg []byte, c *chainDecider, qname []byte) bool {
	off, an := answerSection(msg)
	var name [maxNameLen]byte
	for range an {
		end := dnsmsg.NameEnd(msg, off)
		if end < 0 || end+10 > len(msg) {
			return false
		}
		typ := binary.BigEndian.Uint16(msg[end:])
		rdata := end + 10
		next := rdata + int(binary.BigEndian.Uint16(msg[end+8:]))
		if next > len(msg) {
			return false
		}
		if typ == dns.TypeCNAME || typ == dns.TypeDNAME {
			if target, ok := expandName(msg[:next], rdata, name[:0]); ok && c.add(target, qname) {
				return true
			}
		}
		off = next
	}
	return false
}

// answerSection returns the offset of msg's answer section and its
// record count, or 0 records when the question section cannot be read.
func answerSection(msg []byte) (off, an int) {
	if len(msg) < dnsmsg.HeaderLen {
		return 0, 0
	}
	qd, an := int(binary.BigEndian.Uint16(msg[4:])), int(binary.BigEndian.Uint16(msg[6:]))
	off = dnsmsg.HeaderLen
	for range qd {
		end := dnsmsg.NameEnd(msg, off)
		if end < 0 || end+4 > len(msg) {
			return 0, 0
		}
		off = end + 4
	}
	return off, an
}

// hasChain reports whether the answer section of m, or of the bytes out
// when m is nil, may hold a CNAME or DNAME record that walkChain (or
// decideChain's loop over m) would hand on: the cheap test that spares an
// answer without one the decision's setup. In bytes it steps over names
// without following their pointers (skipName), so it reads at least as
// far as walkChain: false means walkChain would find no target.
func hasChain(m *dns.Msg, out []byte) bool {
	if m != nil {
		for _, rr := range m.Answer {
			switch rr.(type) {
			case *dns.CNAME, *dns.DNAME:
				return true
			}
		}
		return false
	}
	if len(out) < dnsmsg.HeaderLen {
		return false
	}
	qd, an := int(binary.BigEndian.Uint16(out[4:])), int(binary.BigEndian.Uint16(out[6:]))
	off := dnsmsg.HeaderLen
	for range qd {
		if off = skipName(out, off); off < 0 || off+4 > len(out) {
			return false
		}
		off += 4
	}
	for range an {
		end := skipName(out, off)
		if end < 0 || end+10 > len(out) {
			return false
		}
		next := end + 10 + int(binary.BigEndian.Uint16(out[end+8:]))
		if next > len(out) {
			return false
		}
		if typ := binary.BigEndian.Uint16(out[end:]); typ == dns.TypeCNAME || typ == dns.TypeDNAME {
			return true
		}
		off = next
	}
	return false
}

// skipName returns the offset just past the name at msg[off:], its
// labels and the pointer that may end it, or -1 when it runs past msg or
// holds a label type RFC 1035 does not define. It checks nothing else
// (dnsmsg.NameEnd does, following the pointers): it fails only where
// NameEnd fails too.
func skipName(msg []byte, off int) int {
	for off < len(msg) {
		switch c := int(msg[off]); {
		case c == 0:
			return off + 1
		case c&0xC0 == 0xC0:
			if off+1 >= len(msg) {
				return -1
			}
			return off + 2
		case c&0xC0 != 0:
			return -1
		default:
			off += 1 + c
		}
	}
	return -1
}

// expandName appends the name at msg[off:] to dst in wire format, its
// compression pointers followed (dnsmsg.NameEnd's rules: each points
// before the part that holds it, so none loops), and reports false for a
// name that is not well formed.
func expandName(msg []byte, off int, dst []byte) ([]byte, bool) {
	if dnsmsg.NameEnd(msg, off) < 0 {
		return dst, false
	}
	for {
		c := int(msg[off])
		switch {
		case c == 0:
			return append(dst, 0), true
		case c&0xC0 == 0xC0:
			off = (c&0x3F)<<8 | int(msg[off+1])
		default:
			dst = append(dst, msg[off:off+1+c]...)
			off += 1 + c
		}
	}
}

// wireName is the name asked in wire format: the client's bytes when the
// question holds no compression pointer (as nearly every query's does),
// else the name packed into buf.
func (r *request) wireName(buf *[maxNameLen]byte) []byte {
	if name := r.plainName(); name != nil {
		return name
	}
	end, err := dns.PackDomainName(r.question[0].Name, buf[:], 0, nil, false)
	if err != nil {
		return nil // never blocked: Decide refuses a malformed name
	}
	return buf[:end]
}

// plainName is the name asked in wire format as the client wrote it, or
// nil when its question holds a compression pointer.
func (r *request) plainName() []byte {
	if n := dnsmsg.QuestionLen(r.raw[dnsmsg.HeaderLen:]); n > 0 {
		return r.raw[dnsmsg.HeaderLen : dnsmsg.HeaderLen+n-4]
	}
	return nil
}

// blocked builds in buf the blocked answer to r by a's mode, and returns
// it and its rcode: null (A 0.0.0.0, AAAA ::, other types NODATA),
// nxdomain, nodata, refused, or ip (answer_ip's address of the type
// asked, else NODATA). NXDOMAIN and NODATA carry the SOA of
// blockedMName, TTL a.TTL. With EDNS it carries EDE 15 "blocked by
// LIST", dropped should it make the answer exceed the client's UDP size.
// It never sets AD.
func (r *request) blocked(a blocking.Answer, list string, buf []byte) ([]byte, int) {
	qtype := r.question[0].Qtype
	rcode := dns.RcodeSuccess
	var addr []byte // the answer's RDATA, or nil: NODATA
	switch a.Mode {
	case "nxdomain":
		rcode = dns.RcodeNameError
	case "refused":
		rcode = dns.RcodeRefused
	case "nodata":
	case "ip":
		switch {
		case qtype == dns.TypeA && a.IPv4.Is4():
			v := a.IPv4.As4()
			addr = v[:]
		case qtype == dns.TypeAAAA && a.IPv6.Is6():
			v := a.IPv6.As16()
			addr = v[:]
		}
	default: // null
		switch qtype {
		case dns.TypeA:
			addr = zero16[:4]
		case dns.TypeAAAA:
			addr = zero16[:]
		}
	}

	flags := dnsmsg.FlagQR | dnsmsg.FlagRA | uint16(rcode) // RA: recursion is what nxdnsd offers
	if r.rd {
		flags |= dnsmsg.FlagRD
	}
	if r.cd {
		flags |= dnsmsg.FlagCD
	}
	b := append(buf[:0], byte(r.id>>8), byte(r.id), byte(flags>>8), byte(flags), 0, 1, 0, 0, 0, 0, 0, 0)
	b = r.appendQuestion(b)
	switch {
	case addr != nil:
		b = appendRR(b, qtype, a.TTL, addr)
		binary.BigEndian.PutUint16(b[6:], 1)
	case rcode != dns.RcodeRefused:
		b = appendSOA(b, a.TTL)
		binary.BigEndian.PutUint16(b[8:], 1)
	}
	if !r.edns {
		return b, rcode
	}
	plain := len(b)
	b = appendBlockedOPT(b, r.do, list)
	if len(b) > r.limit {
		b = appendBlockedOPT(b[:plain], r.do, "")
	}
	binary.BigEndian.PutUint16(b[10:], 1)
	return b, rcode
}

// zero16 is the RDATA of the null mode's A (its first 4 bytes) and AAAA.
var zero16 [16]byte

// appendQuestion appends the client's question as it wrote it.
func (r *request) appendQuestion(b []byte) []byte {
	if q := r.questionBytes(); len(q) > 0 {
		return append(b, q...)
	}
	// A question parseGeneral took that holds a pointer: packed again.
	var name [maxNameLen]byte
	end, err := dns.PackDomainName(r.question[0].Name, name[:], 0, nil, false)
	if err != nil {
		end = copy(name[:], []byte{0})
	}
	b = append(b, name[:end]...)
	return binary.BigEndian.AppendUint32(b, uint32(r.question[0].Qtype)<<16|uint32(r.question[0].Qclass))
}

// ownerPointer is a compression pointer to the question's name, at
// offset 12.
const ownerPointer = 0xC000 | dnsmsg.HeaderLen

// appendRR appends a record of type typ, class IN, owned by the name
// asked.
func appendRR(b []byte, typ uint16, ttl uint32, rdata []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, ownerPointer)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint16(b, dns.ClassINET)
	b = binary.BigEndian.AppendUint32(b, ttl)
	b = binary.BigEndian.AppendUint16(b, uint16(len(rdata)))
	return append(b, rdata...)
}

// appendSOA appends the blocked answers' SOA, owned by the name asked.
func appendSOA(b []byte, ttl uint32) []byte {
	b = binary.BigEndian.AppendUint16(b, ownerPointer)
	b = binary.BigEndian.AppendUint16(b, dns.TypeSOA)
	b = binary.BigEndian.AppendUint16(b, dns.ClassINET)
	b = binary.BigEndian.AppendUint32(b, ttl)
	b = binary.BigEndian.AppendUint16(b, uint16(len(blockedMName)+len(blockedRName)+20))
	b = append(b, blockedMName...)
	b = append(b, blockedRName...)
	for _, v := range [...]uint32{1, 3600, 1200, 604800, ttl} { // serial, refresh, retry, expire, minimum
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return b
}

// appendBlockedOPT appends an OPT record advertising dnsmsg.EDNSSize, with
// the DO bit when do is set and, unless list is "", EDE 15 "blocked by
// LIST". ARCOUNT is the caller's.
func appendBlockedOPT(b []byte, do bool, list string) []byte {
	var flags byte
	if do {
		flags = 0x80 // DO is the top bit of the OPT's flags (RFC 3225)
	}
	rdlen := 0
	if list != "" {
		rdlen = 4 + 2 + len(blockedText) + len(list)
	}
	b = append(b, 0, 0, byte(dns.TypeOPT), dnsmsg.EDNSSize>>8, dnsmsg.EDNSSize&0xFF, 0, 0, flags, 0, byte(rdlen>>8), byte(rdlen))
	if list == "" {
		return b
	}
	b = append(b, 0, byte(dns.EDNS0EDE))
	b = binary.BigEndian.AppendUint16(b, uint16(rdlen-4))
	b = binary.BigEndian.AppendUint16(b, edeBlocked)
	b = append(b, blockedText...)
	return append(b, list...)
}
