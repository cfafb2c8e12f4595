package blocking

import (
	"math/bits"
	"regexp"
	"slices"

	"github.com/nxdnsd/nxdnsd/blocking/rule"
)

// A set is one list's rules, immutable once built: what a query is looked
// up in. It is a sorted array of 64-bit keys, each a name's 60-bit hash
// and four flags saying what the rules of that name match, plus a bucket
// index on the hashes' top bits.
//
// Why this structure (measured, BENCHMARKS.md "Blocking: the rule set"):
// a name and all its suffixes are hashed in one pass over the labels
// (hash.go), and each suffix then costs one bucket read and a scan of
// about three adjacent keys, one or two cache lines; 1M rules take 8 bytes
// each plus about 2 for the index, where a set of strings (blocky's
// length-bucketed strings, a map[string]) holds the names themselves, 20
// to 30 bytes each, and a trie several pointers per label. The price is
// that a name is not stored: a name whose hash equals a rule's by chance
// would be blocked. With 1M rules and a five-label name that chance is
// 5 * 2^20 / 2^60, about 5e-12 per query (a billion queries a day would
// meet one in 500 years), and the seed is random per process, so no one
// can aim for a collision. Two rules whose hashes collide merge; their
// flags are or-ed.
type set struct {
	keys  []uint64 // sorted; key>>flagBits is the hash, the low bits the flags
	index []uint32 // index[b] is the first key of bucket b; len 2^bucketBits + 1
	shift uint8    // 64 - bucketBits: a hash's bucket is key >> shift

	regexps  []regexpRule
	flags    uint8 // every key's flags or-ed
	anyAllow bool  // the set holds an allow rule, hashed or regexp

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

// find returns the flags of hash h, or 0.
func (s *set) find(h uint64) uint8 {
	b := h >> s.shift
	lo, hi := s.index[b], s.index[b+1]
	want := h >> flagBits
	for _, k := range s.keys[lo:hi] {
		if k>>flagBits == want {
			return uint8(k & flagMask)
		}
	}
	return 0
}

// match is what a set says of one name: the label where the first
// block rule and the first allow rule start (counted from the left), or
// -1. A rule at label 0 is the name itself.
type match struct {
	block, allow int
	blockFlags   uint8
	allowFlags   uint8
	re           *regexpRule // the regexp that matched, when block or allow is regexpAt
}

// regexpAt marks a match made by a regular expression.
const regexpAt = -2

// lookup looks ls up: the name itself among the exact rules, every
// suffix above it among the "below" rules. needBlock false skips what
// could only find a block (the caller already has one): allow rules are
// still looked for.
func (s *set) lookup(ls *labels, needBlock bool) match {
	m := match{block: -1, allow: -1}
	if len(s.keys) > 0 {
		for i := range ls.n {
			f := s.find(ls.hashes[i])
			if f == 0 {
				continue
			}
			// The name itself matches the exact rules, a name above it
			// the "below" ones; the flags kept are the key's, which say
			// how the rule is written.
			hit := f & (blockBelow | allowBelow)
			if i == 0 {
				hit = f & (blockExact | allowExact)
			}
			if hit&(blockExact|blockBelow) != 0 && m.block < 0 && needBlock {
				m.block, m.blockFlags = i, f&(blockExact|blockBelow)
			}
			if hit&(allowExact|allowBelow) != 0 {
				m.allow, m.allowFlags = i, f&(allowExact|allowBelow)
				return m // an allow wins over every block: nothing else matters
			}
		}
	}
	return m
}

// lookupRegexps tries the regular expressions on text, the name without
// its final dot, when the hashes found nothing that settles it.
func (s *set) lookupRegexps(m match, text []byte, needBlock bool) match {
	for i := range s.regexps {
		r := &s.regexps[i]
		if r.allow && m.allow < 0 || !r.allow && needBlock && m.block < 0 {
			if r.re.Match(text) {
				if r.allow {
					m.allow, m.re = regexpAt, r
					return m
				}
				m.block, m.re = regexpAt, r
			}
		}
	}
	return m
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
	emit      func(rule.Rule)
}

// newBuilder starts a set. hint is the number of keys expected (the copy
// in force's), so that a refresh of a list of the same size grows the key
// array once instead of doubling it into garbage.
func newBuilder(allowList bool, hint int) *builder {
	b := &builder{allowList: allowList, keys: make([]uint64, 0, hint+hint/16)}
	b.emit = b.add
	return b
}

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
}

// rules is the number of rules read so far, duplicates included.
func (b *builder) rules() int { return len(b.keys) + len(b.regexps) }

// finish sorts and merges the keys in place and indexes them. The
// builder must not be used again.
func (b *builder) finish() *set {
	keys := b.keys
	slices.Sort(keys)
	// Merge the keys of one hash (duplicate lines, or a name with both
	// an exact and a wildcard rule): sorted, they are adjacent.
	out := keys[:0]
	var all uint8
	for _, k := range keys {
		if n := len(out); n > 0 && out[n-1]>>flagBits == k>>flagBits {
			out[n-1] |= k & flagMask
		} else {
			out = append(out, k)
		}
		all |= uint8(k & flagMask)
	}
	// Four keys or fewer per bucket on average, at least two: the index
	// costs 2 to 4 bytes a key and a lookup scans one or two cache lines.
	bucketBits := 0
	if len(out) >= 4 {
		bucketBits = bits.Len(uint(len(out))) - 2
	}
	index := make([]uint32, 1<<bucketBits+1)
	shift := uint8(64 - bucketBits)
	b2 := 0
	for i, k := range out {
		for bk := int(k >> shift); b2 <= bk && bucketBits > 0; b2++ {
			index[b2] = uint32(i)
		}
	}
	for ; b2 < len(index); b2++ {
		index[b2] = uint32(len(out))
	}
	if bucketBits == 0 {
		index[0] = 0
	}
	s := &set{
		keys:     out,
		index:    index,
		shift:    shift,
		regexps:  slices.Clip(b.regexps),
		flags:    all,
		anyAllow: all&(allowExact|allowBelow) != 0 || slices.ContainsFunc(b.regexps, func(r regexpRule) bool { return r.allow }),
		rules:    len(out) + len(b.regexps),
		skipped:  b.skipped,
	}
	b.keys, b.regexps = nil, nil
	return s
}

// bytes is what the set holds in memory, near enough: its arrays.
func (s *set) bytes() int { return 8*cap(s.keys) + 4*len(s.index) }
