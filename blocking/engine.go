// Package blocking decides which queries are blocked (spec section 11):
// block and allow lists fetched from URLs or read from files, groups of
// clients, custom rules, pausing, and the admin API and metrics of the
// section.
//
// The query path calls an Engine, which reads one immutable snapshot of
// every rule in force through an atomic pointer: a decision is a handful
// of hash lookups, with no lock and no allocation. A Manager owns the
// Engine: it loads and refreshes the lists, one at a time, builds each
// new copy beside the old one and swaps it in.
package blocking

import (
	"math"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nxdnsd/nxdnsd/config"
)

// Engine decides for the query path. Its methods are safe for concurrent
// use; Decide and DecideChain allocate nothing.
type Engine struct {
	snap   atomic.Pointer[snapshot] // nil: blocking disabled, nothing applies
	hot    atomic.Pointer[snapshot] // snap when it holds a rule, else nil: what the query path reads
	paused atomic.Int64             // 0 running; pausedForever; else the Unix nanoseconds it resumes at
	now    func() time.Time         // always non-nil
}

// pausedForever marks a pause until resumed.
const pausedForever = math.MaxInt64

// NewEngine returns an Engine that blocks nothing until a Manager gives
// it rules. now is the clock (nil: time.Now), read only while paused.
func NewEngine(now func() time.Time) *Engine {
	if now == nil {
		now = time.Now
	}
	return &Engine{now: now}
}

// snapshot is every rule in force at one moment: a query reads one, so it
// sees a list's old copy or its new one, never a mix.
type snapshot struct {
	// views holds what settles a name no rule names, read first: every
	// hashed set's filter, whatever the client's groups, unless some set
	// has a regular expression (then nil). Kept here, beside the rest of
	// the snapshot, so that such a name (most names a resolver is asked)
	// costs the snapshot's lines and the filters' words, not the pointers
	// from the snapshot through the lists to their sets.
	views []setView

	lists  []*listRules // by list index: the enabled lists in configured order
	groups []group      // configured order; the default group last
	custom *listRules   // the custom rules, named "rule", for every client; never nil
	cname  bool         // cname_inspection
	answer Answer       // what a blocked query is answered
	serial uint32       // this snapshot's number, never 0 once stored (Rules.Serial)
	memo   *memo        // its blocked decisions (memo.go); never nil once prepared
}

// serials numbers the snapshots as they are stored.
var serials atomic.Uint32

// setView is a set's filter and label masks, copied (the filter shared).
type setView struct {
	filter                   []uint64
	exactLabels, belowLabels uint64
}

// prepare fills s.views from its sets, once they are in place, and gives
// s an empty memory of decisions.
func (s *snapshot) prepare() {
	s.memo = new(memo)
	s.views = nil
	var views []setView
	for _, lr := range append([]*listRules{s.custom}, s.lists...) {
		switch {
		case lr.set == nil || lr.set.homes == 0 && len(lr.set.regexps) == 0:
			continue // nothing to look up
		case len(lr.set.regexps) > 0:
			return // a regexp can match any name: no quick answer
		}
		views = append(views, setView{filter: lr.set.filter, exactLabels: lr.set.exactLabels, belowLabels: lr.set.belowLabels})
	}
	if views == nil {
		views = []setView{} // no hashed rule: every name is settled at once
	}
	s.views = views
}

// namesNothing reports whether no rule of any set in s can name the name
// whose suffixes' hashes are hs (the filters reject every suffix): the
// decision is that nothing matched. false says nothing.
func (s *snapshot) namesNothing(hs []uint64) bool {
	if s.views == nil {
		return false
	}
	n := len(hs)
	for vi := range s.views {
		v := &s.views[vi]
		words := uint64(len(v.filter))
		for i, h := range hs {
			lengths, x := v.belowLabels, h&^flagMask^belowTweak
			if i == 0 {
				lengths, x = v.exactLabels, h&^flagMask
			}
			if lengths&labelBit(n-i) == 0 {
				continue
			}
			if w, b := filterWord(x, words); v.filter[w]&b == b {
				return false
			}
		}
	}
	return true
}

// Answer is how a blocked query is answered (blocking.answer,
// answer_ip, answer_ttl_s), as in force with the rules that decided.
type Answer struct {
	Mode string     // null, nxdomain, nodata, refused or ip
	IPv4 netip.Addr // answer = "ip": the A record's address, or the zero Addr (NODATA for A)
	IPv6 netip.Addr // answer = "ip": the AAAA record's address, or the zero Addr
	TTL  uint32     // of the records, and of the SOA of NXDOMAIN and NODATA answers
}

// listRules is one list's rules in force, and its counter.
type listRules struct {
	name    string
	allow   bool           // an allow list
	set     *set           // nil while no copy has been loaded
	blocked *atomic.Uint64 // nxdns_blocked_total{list}; kept across copies and reloads
}

// group is one [[blocking.groups]] entry, or the default group.
type group struct {
	name     string
	prefixes []netip.Prefix
	names    []string // lower-case client names
	lists    listBits
}

// listBits is a set of list indexes.
type listBits [(config.MaxBlockingLists + 63) / 64]uint64

func (b *listBits) add(i int)      { b[i/64] |= 1 << (i % 64) }
func (b *listBits) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b *listBits) or(o *listBits) {
	b[0], b[1], b[2], b[3] = b[0]|o[0], b[1]|o[1], b[2]|o[2], b[3]|o[3]
}
func (b *listBits) empty() bool { return b[0]|b[1]|b[2]|b[3] == 0 }
func (g *group) member(a netip.Addr, names []string) bool {
	for _, p := range g.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	for _, want := range g.names {
		for _, n := range names {
			if strings.EqualFold(strings.TrimSuffix(n, "."), want) {
				return true
			}
		}
	}
	return false
}

// Decision is what blocking says of one name for one client.
type Decision struct {
	// Blocked: answer with the blocked answer (blocking.answer).
	Blocked bool
	// Allowed: an allow rule matched (it won over any block rule). An
	// allow rule for the name asked exempts its answer from CNAME
	// inspection.
	Allowed bool
	// List names the list whose rule decided: the first configured list
	// that blocks, or the one that allows; "rule" for the custom rules; ""
	// when no rule matched. It is the name of EDE 15's "blocked by LIST",
	// the query log's list field and the metrics' list label.
	List string

	groups  uint64      // bit i: the snapshot's groups[i]
	at      int         // label where the matching rule's name starts; regexpAt for a regexp
	flags   uint8       // the matching key's flags
	re      *regexpRule // the regexp that matched, or nil
	snap    *snapshot   // the snapshot decided on, for GroupNames
	target  int         // DecideChain: the chain entry that matched, else -1
	rules   *listRules  // the list that decided, or nil
	unnamed bool        // no rule of the snapshot, in any list, can name the name
}

// NamesNothing reports that no rule of the rules that decided, in any
// list, whatever the client's groups, can name the name decided on: the
// same name gets the same decision from these rules for every client.
// The query path notes it on the name's cache entry (cache.Hit.
// MarkNamesNothing) and spares the later hits a decision. A decision
// that blocks nothing may still report false (a filter's false positive,
// a rule of another group's list, a regular expression in force).
func (d *Decision) NamesNothing() bool { return d.unnamed }

// Decide decides for a query of qname, a name in wire format
// (uncompressed, as the question carries it; any case), from client, whose
// names (spec section 15; nil until client names exist) place it in groups
// too. A blocked decision is counted in nxdns_blocked_total. A malformed
// name is never blocked.
func (e *Engine) Decide(client netip.Addr, clientNames []string, qname []byte) Decision {
	var d Decision
	e.DecideTo(&d, client, clientNames, qname)
	return d
}

// DecideTo is Decide writing the decision into *d, the query path's form:
// a Decision copied just after it was written costs a stalled load.
func (e *Engine) DecideTo(d *Decision, client netip.Addr, clientNames []string, qname []byte) {
	Rules{e.active()}.DecideTo(d, client, clientNames, qname)
}

// Rules are the rules in force at one moment: a query decided with them
// is decided against one rule set whatever reload comes meanwhile.
type Rules struct{ s *snapshot }

// Rules returns the rules in force now.
func (e *Engine) Rules() Rules { return Rules{e.active()} }

// NamesClients reports whether a group of r places clients by their
// names: when not, a decision does not read them, and the query path need
// not look them up (most configurations: the default group alone, or
// groups by address).
func (r Rules) NamesClients() bool {
	if r.s == nil {
		return false
	}
	for i := range r.s.groups {
		if len(r.s.groups[i].names) > 0 {
			return true
		}
	}
	return false
}

// Serial is the number of the rules, which no other rule set in force
// since the process started has had (a new copy of a list, a custom
// rule, a reload each make new rules); 0 when no rule is in force or
// blocking is paused. A note made for one rule set (cache.Hit.
// MarkNamesNothing) holds for it alone.
func (r Rules) Serial() uint32 {
	if r.s == nil {
		return 0
	}
	return r.s.serial
}

// DecideTo is Engine.DecideTo with r.
func (r Rules) DecideTo(d *Decision, client netip.Addr, clientNames []string, qname []byte) {
	s := r.s
	if s == nil {
		*d = Decision{}
		return
	}
	var union listBits
	g, lists := s.groupsOf(client, clientNames, &union)
	s.decideFor(d, g, lists, qname)
}

// decideFor decides qname for a client of the groups g, whose lists are
// lists, and counts a block.
func (s *snapshot) decideFor(d *Decision, g uint64, lists *listBits, qname []byte) {
	if !s.decideWire(qname, lists, d) {
		*d = Decision{}
		return
	}
	d.groups = g
	d.count()
}

// DecideChain is CNAME inspection (spec section 11) of an answer to qname
// whose CNAME and DNAME targets are chain (wire names, in answer order).
// It returns a blocked decision naming the list that matched a target,
// counted in nxdns_blocked_total, or a decision that blocks nothing: when
// cname_inspection is off, when an allow rule matches qname itself
// (Allowed), or when no target is blocked. The query path calls it after
// Decide(qname) let the query through; a qname Decide blocks is blocked
// here too.
func (e *Engine) DecideChain(client netip.Addr, clientNames []string, qname []byte, chain [][]byte) Decision {
	s := e.active()
	if s == nil || !s.cname || len(chain) == 0 {
		return Decision{}
	}
	var union listBits
	g, lists := s.groupsOf(client, clientNames, &union)
	var d Decision
	if !s.decideWire(qname, lists, &d) {
		return Decision{}
	}
	if d.Allowed || d.Blocked { // allowed: exempt; blocked: Decide would have said so
		d.groups = g
		d.count()
		return d
	}
	for i, target := range chain {
		if s.decideWire(target, lists, &d) && d.Blocked {
			d.groups, d.target = g, i
			d.count()
			return d
		}
	}
	return Decision{groups: g, snap: s, target: -1}
}

// decideWire splits and hashes a wire name and decides; it reports false
// for a malformed name.
func (s *snapshot) decideWire(wire []byte, lists *listBits, d *Decision) bool {
	var ls labels
	var hashes [shortLabels]uint64
	switch ls.split(wire, hashes[:]) {
	case nil:
		s.decide(&ls, hashes[:ls.n], wire, lists, d)
		return true
	case errLong:
		return s.decideLong(wire, lists, d)
	}
	return false
}

// decideLong is decideWire for a name of more than shortLabels labels,
// with an array for all their hashes on its own stack frame.
//
//go:noinline
func (s *snapshot) decideLong(wire []byte, lists *listBits, d *Decision) bool {
	var ls labels
	var hashes [maxLabels]uint64
	if ls.split(wire, hashes[:]) != nil {
		return false
	}
	s.decide(&ls, hashes[:ls.n], wire, lists, d)
	return true
}

// active is the snapshot in force, or nil when blocking is disabled,
// holds no rule or is paused. Without a rule it costs one atomic load.
func (e *Engine) active() *snapshot {
	s := e.hot.Load()
	if s == nil {
		return nil
	}
	if e.pausedNow() {
		return nil
	}
	return s
}

// pausedNow reports whether a pause is in force.
func (e *Engine) pausedNow() bool {
	p := e.paused.Load()
	return p != 0 && (p == pausedForever || e.now().UnixNano() < p)
}

// Idle reports whether no rule is in force (blocking disabled, no list
// loaded yet, no custom rule): Decide and DecideChain would block
// nothing. It is one atomic load, the query path's test before it pays
// for a decision.
func (e *Engine) Idle() bool { return e.hot.Load() == nil }

// Inspects reports whether an answer may need CNAME inspection: a rule
// is in force and cname_inspection is on. One atomic load, as Idle.
func (e *Engine) Inspects() bool {
	s := e.hot.Load()
	return s != nil && s.cname
}

// store publishes s (nil: blocking disabled) for the API and, when it
// holds a rule, for the query path.
func (e *Engine) store(s *snapshot) {
	if s != nil {
		for s.serial == 0 { // 0 is "no rule set"; skipped when the count wraps
			s.serial = serials.Add(1)
		}
	}
	e.snap.Store(s)
	if s != nil && !s.holdsRules() {
		s = nil
	}
	e.hot.Store(s)
}

// holdsRules reports whether s has a rule that can decide anything.
func (s *snapshot) holdsRules() bool {
	if s.custom.set != nil {
		return true
	}
	for _, lr := range s.lists {
		if lr.set != nil && lr.set.rules > 0 {
			return true
		}
	}
	return false
}

// groupsOf returns the groups client is in (bits of s.groups) and the
// union of their lists: the one group's own, or union filled in. A
// client in the default group alone (every client, with no group
// configured) costs no read of the groups.
func (s *snapshot) groupsOf(client netip.Addr, names []string, union *listBits) (uint64, *listBits) {
	last := len(s.groups) - 1 // the default group
	if last == 0 {
		return 1, &s.groups[0].lists
	}
	client = client.Unmap()
	var g uint64
	var one *listBits
	for i := range s.groups[:last] {
		if s.groups[i].member(client, names) {
			if g == 0 {
				one = &s.groups[i].lists
			} else {
				if g&(g-1) == 0 { // the second group: start the union
					*union = *one
				}
				union.or(&s.groups[i].lists)
				one = union
			}
			g |= 1 << i
		}
	}
	if g == 0 {
		return 1 << last, &s.groups[last].lists
	}
	return g, one
}

// decide looks ls up in the custom rules and the lists in lists: allow
// over block, and among blocks the custom rules first, then the first
// configured list.
func (s *snapshot) decide(ls *labels, hs []uint64, wire []byte, lists *listBits, d *Decision) {
	if s.namesNothing(hs) {
		*d = Decision{snap: s, target: -1, unnamed: true}
		return
	}
	var dc decider
	// The hashes first, for every list: they are cheap, and an allow
	// found among them spares every regular expression.
	done := dc.hashes(s.custom, hs)
	for i := 0; !done && i < len(s.lists); i++ {
		if lists.has(i) {
			done = dc.hashes(s.lists[i], hs)
		}
	}
	if !done {
		var buf *[256]byte // the name's text, from textBufs on first use
		done = dc.regexps(s.custom, ls, wire, &buf)
		for i := 0; !done && i < len(s.lists); i++ {
			if lists.has(i) {
				done = dc.regexps(s.lists[i], ls, wire, &buf)
			}
		}
		if buf != nil {
			textBufs.Put(buf)
		}
	}
	switch {
	case dc.allow != nil:
		dc.allowMatch.decision(dc.allow, true, s, d)
	case dc.block != nil:
		dc.blockMatch.decision(dc.block, false, s, d)
	default:
		*d = Decision{snap: s, target: -1}
	}
}

// decider is one decision in progress: the first block found and the
// allow, if any.
type decider struct {
	block, allow           *listRules
	blockMatch, allowMatch match
	text                   []byte // the name without its final dot, once a regexp needs it
}

// hashes looks ls up in lr's hashed rules. It reports true when an allow
// rule matched: the decision is made.
func (dc *decider) hashes(lr *listRules, hs []uint64) bool {
	if lr.set == nil {
		return false
	}
	needBlock := dc.block == nil && !lr.allow
	if !needBlock && !lr.set.hasAllow() {
		return false
	}
	var m match
	lr.set.lookup(hs, needBlock, &m)
	return dc.take(lr, &m, needBlock)
}

// textBufs hold a name's text for the regular expressions, which keep
// their input beyond the stack (regexp's machines are pooled), so that a
// buffer on the stack would be allocated on every query.
var textBufs = sync.Pool{New: func() any { return new([256]byte) }}

// regexps tries lr's regular expressions on the name's text, taking buf
// from textBufs and filling it on first use.
func (dc *decider) regexps(lr *listRules, ls *labels, wire []byte, buf **[256]byte) bool {
	if lr.set == nil || len(lr.set.regexps) == 0 {
		return false
	}
	needBlock := dc.block == nil && !lr.allow
	if !needBlock && !lr.set.hasAllow() {
		return false
	}
	if *buf == nil {
		*buf = textBufs.Get().(*[256]byte)
		dc.text = ls.appendText((*buf)[:0], wire, 0)
	}
	m := match{block: -1, allow: -1}
	lr.set.lookupRegexps(&m, dc.text, needBlock)
	return dc.take(lr, &m, needBlock)
}

func (dc *decider) take(lr *listRules, m *match, needBlock bool) bool {
	if m.allow != -1 {
		dc.allow, dc.allowMatch = lr, *m
		return true
	}
	if m.block != -1 && needBlock {
		dc.block, dc.blockMatch = lr, *m
	}
	return false
}

// decision turns a list's match into a Decision.
func (m *match) decision(lr *listRules, allowed bool, s *snapshot, d *Decision) {
	*d = Decision{Blocked: !allowed, Allowed: allowed, List: lr.name, snap: s, target: -1, rules: lr, re: m.re}
	d.at, d.flags = int(m.block), m.blockFlags
	if allowed {
		d.at, d.flags = int(m.allow), m.allowFlags
	}
}

// count counts a blocked decision in nxdns_blocked_total.
func (d *Decision) count() {
	if !d.Blocked {
		return
	}
	d.rules.blocked.Add(1)
}

func (s *snapshot) byName(name string) *listRules {
	if name == s.custom.name {
		return s.custom
	}
	for _, lr := range s.lists {
		if lr.name == name {
			return lr
		}
	}
	return nil
}

// GroupNames names the groups the client was found in, in configured
// order ("default" when in no other). It allocates: for the API and logs,
// not the query path.
func (d Decision) GroupNames() []string {
	if d.snap == nil {
		return nil
	}
	var out []string
	for i, g := range d.snap.groups {
		if d.groups&(1<<i) != 0 {
			out = append(out, g.name)
		}
	}
	return out
}

// Rule renders the rule that decided in a block list's syntax
// ("ads.example", "||ads.example^", "*.ads.example", "@@||ok.example^",
// "/^ad[0-9]+\./"), given the name that was decided on: the qname passed
// to Decide, or for DecideChain the chain entry ChainIndex names. A
// rule's name is lower-case, and the rules of one name merge: a list
// holding "x" and "*.x" reads "||x^". "" when no rule matched. It
// allocates: for the API and logs, not the query path.
func (d Decision) Rule(name []byte) string {
	if !d.Blocked && !d.Allowed {
		return ""
	}
	if d.at == regexpAt {
		return d.re.text
	}
	var ls labels
	if ls.offsets(name) != nil || d.at < 0 || d.at >= ls.n {
		return ""
	}
	text := string(ls.appendText(nil, name, d.at))
	exact, below := d.flags&(blockExact|allowExact) != 0, d.flags&(blockBelow|allowBelow) != 0
	switch {
	case exact && below && d.Allowed:
		return "@@||" + text + "^"
	case exact && below:
		return "||" + text + "^"
	case below:
		return "*." + text
	}
	return text
}

// Answer is how to answer a blocked query: the settings in force with
// the rules that decided (a reload changes both at once). The zero
// Answer for a Decision made by no snapshot (blocking off or paused).
func (d Decision) Answer() Answer {
	if d.snap == nil {
		return Answer{}
	}
	return d.snap.answer
}

// ChainIndex is the index in DecideChain's chain of the target that was
// blocked, or -1.
func (d Decision) ChainIndex() int {
	if d.snap == nil {
		return -1
	}
	return d.target
}
