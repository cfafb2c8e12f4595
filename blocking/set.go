package blocking

import (
	"bytes"
	"math/bits"
	"regexp"
	"slices"

	"github.com/nxdnsd/nxdnsd/blocking/rule"
)

// A set is one list's rules, immutable once built: what a query is looked
// up in. It holds no names, only 64-bit keys, each a name's 60-bit hash
// and four flags saying what the rules of that name match, in a table
// that is at once a sorted array and a linear-probing hash table: the
// keys in increasing order, each in the first free slot at or after its
// home slot (the key's top bits scaled to the table), about one slot in
// three left empty. A lookup goes to the home slot and reads on until a
// key at or above the one it wants, or an empty slot: one cache line,
// almost always (Robin Hood order in linear probing, built by a sort).
//
// In front of the table, a filter (a blocked Bloom filter, one byte an
// entry: 1.2 MiB for 1M rules, which a core's 2 MiB L2 cache holds where
// it cannot hold the 12 MiB table) says of each suffix whether some rule
// may name it; only what it lets through, about 3.5 % of the suffixes no
// rule names, is looked up in the table. Most names a resolver is asked
// are in no list, so most decisions touch the filter only.
//
// Why this structure (measured, BENCHMARKS.md "Blocking: the rule set"):
// a name and all its suffixes are hashed in one pass over the labels
// (hash.go), and each suffix then costs a load from the filter, and one
// cache line of the table when the filter lets it through; 1M rules take
// about 13 bytes each, where a set of strings (blocky's length-bucketed
// strings, a map[string]) holds the names themselves, 20 to 30 bytes
// each plus their headers, and a trie several pointers per label. A
// sorted array with a separate bucket index (the first version of this
// file) cost 10 bytes a rule and two cache misses a probe; a table a
// fifth empty 10 bytes and about 10 % more time per decision than a third
// empty. Without the filter, every suffix of every name cost a load from
// the table, a miss in the caches for 1M rules: 200 ns a decision
// (Decide1M) where with it 140 ns; a filter of 4 or 6 bits an entry
// measured 155-177 and 146-149 ns, of 12 or 16 bits no better than 8; a
// filter tested for all suffixes before any table lookup, without
// branches, 10 % slower than one tested and followed suffix by suffix
// (the processor runs ahead into the next suffix's filter load while a
// table load is outstanding). The table is
// built in place in the array the keys were collected in, and the filter
// beside it: a refresh holds the old set and the new one, nothing else.
//
// The price of storing no name is that a name whose hash equals a rule's
// by chance would be blocked. With 1M rules and a five-label name that
// chance is 5 * 2^20 / 2^60, about 5e-12 per query (a billion queries a
// day would meet one in 500 years), and the seed is random per process,
// so no one can aim for a collision. Two rules whose hashes collide
// merge; their flags are or-ed.
type set struct {
	slots []uint64 // the table; 0 is an empty slot (no key is 0: every key has a flag); ends in an empty slot
	homes uint64   // the number of home slots: a key's home is key*homes >> 64

	// filter is a blocked Bloom filter of the keys: a suffix it rejects
	// costs no load from the table. A key is in it once per kind of rule
	// its flags hold, as its hash for the name itself and as its hash
	// xor belowTweak for the names below it, so that a parent of the
	// name asked, tested for "below" rules, is rejected when only an
	// exact rule names it (a hosts line, the commonest rule).
	filter []uint64
	words  uint64 // len(filter), at least 1

	regexps  []regexpRule
	anyAllow bool // the set holds an allow rule, hashed or regexp

	// The label counts of the names of exact rules and of "below" rules,
	// a bit each (labelBit): a suffix of a length no rule has is not
	// looked up.
	exactLabels, belowLabels uint64

	rules   int // rules in force: distinct names and regular expressions
	skipped int // lines skipped: none of the formats, or past the regexp cap
}

// The flags of a key.
const (
	flagBits = 4
	flagMask = 1<<flagBits - 1

	blockExact = 1 << 0 // the name itself is blocked (a hosts line, a plain domain, ||x^)
	blockBelow = 1 << 1 // every name below it is blocked (||x^, *.x)
	allowExact = 1 << 2 // the name itself is allowed
	allowBelow = 1 << 3 // every name below it is allowed
)

// MaxRegexps is the most regular expressions a list may hold (spec
// section 11): each is tried on every query a list applies to, where a
// name costs one hash lookup per label. The rest are skipped and counted.
const MaxRegexps = 1000

type regexpRule struct {
	re    *regexp.Regexp
	text  string // the line as written: "/^ad[0-9]+\./"
	allow bool
}

// filterBits is the filter's size in bits per entry (an entry is a key
// of one kind: exact, or below). Each entry sets three bits of one 64-bit
// word, so that a test is one load; with 8 bits an entry about 3.5 % of
// the entries not in the filter pass it.
const filterBits = 8

// belowTweak tells a key's "below" entry in the filter from its exact
// one: any odd-looking constant with its flag bits clear.
const belowTweak = 0x9e3779b97f4a7c15 &^ flagMask

// filterWord returns the word of entry x (a hash without its flag bits,
// tweaked for its kind) among words, and the bits it sets there: the
// word from x's top bits, the bits from bits the word does not depend on.
func filterWord(x, words uint64) (uint64, uint64) {
	w, _ := bits.Mul64(x, words)
	return w, 1<<(x>>flagBits&63) | 1<<(x>>(flagBits+6)&63) | 1<<(x>>(flagBits+12)&63)
}

// mayHold reports whether the filter may hold entry x; false is certain.
func (s *set) mayHold(x uint64) bool {
	w, b := filterWord(x, s.words)
	return s.filter[w]&b == b
}

// find returns the flags of hash h, or 0.
func (s *set) find(h uint64) uint8 {
	home, _ := bits.Mul64(h&^flagMask, s.homes)
	return s.findFrom(h, home)
}

// findFrom is find from h's home slot.
func (s *set) findFrom(h, home uint64) uint8 {
	want := h >> flagBits
	for _, k := range s.slots[home:] {
		switch {
		case k == 0 || k>>flagBits > want:
			return 0
		case k>>flagBits == want:
			return uint8(k & flagMask)
		}
	}
	return 0
}

// match is what a set says of one name: the label where the first
// block rule and the first allow rule start (counted from the left), or
// -1. A rule at label 0 is the name itself.
type match struct {
	block, allow int32
	blockFlags   uint8
	allowFlags   uint8
	re           *regexpRule // the regexp that matched, when block or allow is regexpAt
}

// regexpAt marks a match made by a regular expression.
const regexpAt = -2

// lookup looks a name up by its suffixes' hashes hs: the name itself
// among the exact rules, every suffix above it among the "below" rules.
// needBlock false skips what could only find a block (the caller already
// has one): allow rules are still looked for.
//
// A suffix is looked up in the table only when it is of a length some
// rule of the right kind has (a five-label name against rules of two to
// five labels skips its last label, a long name its first ones) and the
// filter lets it through.
func (s *set) lookup(hs []uint64, needBlock bool, m *match) {
	*m = match{block: -1, allow: -1}
	if s.homes == 0 {
		return
	}
	n := len(hs)
	for i, h := range hs {
		lengths, x := s.belowLabels, h&^flagMask^belowTweak
		if i == 0 {
			lengths, x = s.exactLabels, h&^flagMask
		}
		if lengths&labelBit(n-i) == 0 || !s.mayHold(x) {
			continue
		}
		f := s.find(h)
		if f == 0 {
			continue // the filter's false positive
		}
		// The name itself matches the exact rules, a name above it the
		// "below" ones; the flags kept are the key's, which say how the
		// rule is written.
		hit := f & (blockBelow | allowBelow)
		if i == 0 {
			hit = f & (blockExact | allowExact)
		}
		if hit&(blockExact|blockBelow) != 0 && m.block < 0 && needBlock {
			m.block, m.blockFlags = int32(i), f&(blockExact|blockBelow)
		}
		if hit&(allowExact|allowBelow) != 0 {
			m.allow, m.allowFlags = int32(i), f&(allowExact|allowBelow)
			return // an allow wins over every block: nothing else matters
		}
	}
}

// labelBit is the bit of a name of n labels in a set's label masks; names
// of 63 labels or more share the last.
func labelBit(n int) uint64 { return 1 << min(n, 63) }

func (s *set) lookupRegexps(m *match, text []byte, needBlock bool) {
	for i := range s.regexps {
		r := &s.regexps[i]
		if r.allow && m.allow < 0 || !r.allow && needBlock && m.block < 0 {
			if r.re.Match(text) {
				if r.allow {
					m.allow, m.re = regexpAt, r
					return
				}
				m.block, m.re = regexpAt, r
			}
		}
	}
}

// hasAllow reports whether the set holds an allow rule.
func (s *set) hasAllow() bool { return s.anyAllow }

// builder builds a set from a stream of lines. It holds the keys of the
// rules read so far and nothing else: the lines are not kept.
type builder struct {
	keys      []uint64
	regexps   []regexpRule
	allowList bool
	skipped   int
	badRegexp int // regexps that did not compile, counted in skipped

	exactLabels, belowLabels uint64 // see set
	emit                     func(rule.Rule)
	atPeak                   func() // or nil; see Manager.atPeak
}

// newBuilder starts a set. hint is the number of keys expected (the copy
// in force's): the keys are collected in an array big enough for the
// table of that many, so that a refresh of a list of about the same size
// allocates it once and builds the table in it.
func newBuilder(allowList bool, hint int) *builder {
	b := &builder{allowList: allowList}
	if hint > 0 {
		b.keys = make([]uint64, 0, tableSize(hint))
	}
	b.emit = b.add
	return b
}

// tableSize is the slots of a table for n keys: half as many again (a
// third of the slots empty: most misses settle at the home slot), and a
// few for the last keys' displacement and the final empty slot.
func tableSize(n int) int { return n + n/2 + 64 }

// line parses one line of the list into the set.
func (b *builder) line(line []byte) {
	if n, comment := rule.Parse(line, b.allowList, b.emit); n == 0 && !comment {
		b.skipped++
	}
}

func (b *builder) add(r rule.Rule) {
	switch r.Kind {
	case rule.Regexp:
		if len(b.regexps) >= MaxRegexps {
			b.skipped++
			return
		}
		re, err := rule.Compile(r.Source)
		if err != nil {
			b.skipped++
			b.badRegexp++
			return
		}
		b.regexps = append(b.regexps, regexpRule{re: re, text: r.Text(), allow: r.Allow})
		return
	}
	var f uint64
	switch {
	case r.Kind == rule.Exact && !r.Allow:
		f = blockExact
	case r.Kind == rule.Exact:
		f = allowExact
	case r.Kind == rule.Suffix && !r.Allow:
		f = blockExact | blockBelow
	case r.Kind == rule.Suffix:
		f = allowExact | allowBelow
	case r.Kind == rule.Below && !r.Allow:
		f = blockBelow
	default:
		f = allowBelow
	}
	b.keys = append(b.keys, nameHash(r.Name)&^flagMask|f)
	bit := labelBit(bytes.Count(r.Name, []byte(".")) + 1)
	if f&(blockExact|allowExact) != 0 {
		b.exactLabels |= bit
	}
	if f&(blockBelow|allowBelow) != 0 {
		b.belowLabels |= bit
	}
}

// rules is the number of rules read so far, duplicates included.
func (b *builder) rules() int { return len(b.keys) + len(b.regexps) }

// finish sorts and merges the keys in place and spreads them into the
// table, in the same array. The builder must not be used again.
func (b *builder) finish() *set {
	keys := b.keys
	slices.Sort(keys)
	// Merge the keys of one hash (duplicate lines, or a name with both
	// an exact and a wildcard rule): sorted, they are adjacent.
	n := 0
	var all uint8
	for _, k := range keys {
		if n > 0 && keys[n-1]>>flagBits == k>>flagBits {
			keys[n-1] |= k & flagMask
		} else {
			keys[n] = k
			n++
		}
		all |= uint8(k & flagMask)
	}
	if cap(keys) < n+n/3+2 { // fuller than three quarters: probes would lengthen
		// More keys than the hint said (or none was given): the table
		// needs an array of its own, the one time two are held.
		grown := make([]uint64, n, tableSize(n))
		copy(grown, keys[:n])
		keys = grown
	}
	slots := keys[:cap(keys)]
	clear(slots[n:])
	s := &set{
		regexps:  slices.Clip(b.regexps),
		anyAllow: all&(allowExact|allowBelow) != 0 || slices.ContainsFunc(b.regexps, func(r regexpRule) bool { return r.allow }),
		rules:    n + len(b.regexps),
		skipped:  b.skipped,

		exactLabels: b.exactLabels,
		belowLabels: b.belowLabels,
	}
	b.keys, b.regexps = nil, nil
	if n == 0 {
		s.slots = []uint64{0}
		return s
	}
	s.filter, s.words = buildFilter(keys[:n])
	s.homes, s.slots = spread(slots, n, b.atPeak), slots
	return s
}

// buildFilter returns the filter of keys: an entry for each kind of rule
// a key's flags hold.
func buildFilter(keys []uint64) ([]uint64, uint64) {
	entries := 0
	for _, k := range keys {
		if k&(blockExact|allowExact) != 0 {
			entries++
		}
		if k&(blockBelow|allowBelow) != 0 {
			entries++
		}
	}
	words := uint64(max(1, (entries*filterBits+63)/64))
	filter := make([]uint64, words)
	add := func(x uint64) {
		w, b := filterWord(x, words)
		filter[w] |= b
	}
	for _, k := range keys {
		h := k &^ flagMask
		if k&(blockExact|allowExact) != 0 {
			add(h)
		}
		if k&(blockBelow|allowBelow) != 0 {
			add(h ^ belowTweak)
		}
	}
	return filter, words
}

// spread places the n sorted keys at the front of slots into their
// table positions, in place, and returns the number of home slots. Key i
// goes to pos(i) = max(home(i), pos(i-1)+1), so its displacement
// d(i) = pos(i) - i = max over j <= i of home(j) - j only grows. A forward
// pass keeps d at the start of every block of spreadBlock keys (an eighth
// of a byte a key); a backward pass, block by block from the last,
// recomputes the block's displacements from its checkpoint and moves each
// key up to its place: into a slot no key still to move occupies, since
// pos(i) >= i, and the block's own keys are still where the sort left
// them, the keys after it having moved only upwards.
func spread(slots []uint64, n int, atPeak func()) uint64 {
	homes := uint64(len(slots) - len(slots)/64 - 2)
	for {
		checkpoints, last := displacements(slots[:n], homes)
		if last >= len(slots)-1 { // the last slot must stay empty: lookups stop there
			homes -= homes/32 + 1 // fewer homes, more room behind
			continue
		}
		if atPeak != nil {
			atPeak()
		}
		var ds [spreadBlock]int
		for b := len(checkpoints) - 1; b >= 0; b-- {
			start := b * spreadBlock
			end := min(start+spreadBlock, n)
			d := checkpoints[b]
			for i := start; i < end; i++ {
				home, _ := bits.Mul64(slots[i]&^flagMask, homes)
				d = max(d, int(home)-i)
				ds[i-start] = d
			}
			for i := end - 1; i >= start; i-- {
				if d := ds[i-start]; d > 0 {
					slots[i+d] = slots[i]
					slots[i] = 0 // left in place it would be harmless (the order holds) but lengthen the scans
				}
			}
		}
		return homes
	}
}

// spreadBlock is how many keys share a displacement checkpoint.
const spreadBlock = 64

// displacements returns d before each block of spreadBlock keys (-1 for
// the first), and the last key's position.
func displacements(keys []uint64, homes uint64) (checkpoints []int, last int) {
	checkpoints = make([]int, 0, (len(keys)+spreadBlock-1)/spreadBlock)
	d := -1
	for i, k := range keys {
		if i%spreadBlock == 0 {
			checkpoints = append(checkpoints, d)
		}
		home, _ := bits.Mul64(k&^flagMask, homes)
		d = max(d, int(home)-i)
	}
	return checkpoints, len(keys) - 1 + d
}

// bytes is what the set holds in memory, near enough: its table.
func (s *set) bytes() int { return 8 * (cap(s.slots) + cap(s.filter)) }
