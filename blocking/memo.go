package blocking

import (
	"net/netip"
	"sync/atomic"
)

// The memory of blocked decisions. A name that is blocked is asked again
// and again (an advertiser's name by every page that shows its ads), and
// every time the same rules give it the same answer; but deciding it
// walks its labels, hashes every suffix and reads the filters and a
// table far larger than a processor's caches. Each snapshot remembers
// its blocked decisions in a small table, under the question's key (the
// cache's hash of it) mixed with the client's groups, and a query that
// finds its decision there is decided in two loads from a table that
// stays in the caches. A new snapshot (a list refreshed, a custom rule, a
// reload) starts with an empty memory, so nothing outlives the rules
// that decided it.
//
// The table is direct-mapped: a decision takes its key's slot from
// whatever was there. A slot is two words, the key and the decision,
// the decision carrying the key's low 32 bits: a reader that meets a
// slot half rewritten (the key of one decision, the word of another)
// finds the two disagree and decides the long way. Only a hash match
// could make it take another name's decision: a 64-bit key, the cache's,
// seeded per process, as the rule set's own 60-bit hashes are (set.go).

// memoBits is log2 of a memory's slots: 4,096 slots, 64 KiB, which a
// core's L2 cache holds beside the rest of the hot path. A household's
// blocked names a minute are far fewer.
const memoBits = 12

// memo is a snapshot's memory of blocked decisions.
type memo [1 << memoBits]memoSlot

type memoSlot struct{ key, val atomic.Uint64 }

// The decision word: valid, the matching key's flags, the label where
// the rule's name starts, the list (0: the custom rules, i+1: lists[i]),
// and the key's low 32 bits.
const (
	memoValid      = 1 << 63
	memoFlagsShift = 56
	memoAtShift    = 48
	memoListShift  = 32
)

// memoKey is the memory's key for a question hashed to key, asked by a
// client of the groups g.
func memoKey(key, g uint64) uint64 {
	k := key ^ g*0x9E3779B97F4A7C15
	if k == 0 {
		k = 1 // 0 is an empty slot's key
	}
	return k
}

// recall decides from the memory of s for a client of the groups g: true
// when the question k was found blocked, with *d written and counted.
func (s *snapshot) recall(k, g uint64, d *Decision) bool {
	slot := &s.memo[k>>(64-memoBits)]
	v := slot.val.Load()
	if v&memoValid == 0 || uint32(v) != uint32(k) || slot.key.Load() != k {
		return false
	}
	lr := s.custom
	if i := int(v >> memoListShift & 0xffff); i > 0 {
		lr = s.lists[i-1]
	}
	*d = Decision{Blocked: true, List: lr.name, groups: g, snap: s, target: -1, rules: lr,
		at: int(v >> memoAtShift & 0xff), flags: uint8(v >> memoFlagsShift & 0x7f)}
	d.count()
	return true
}

// remember keeps d, a blocked decision for the question k, in the memory
// of s. A decision by a regular expression is not kept: it is rare, and
// would need its expression named.
func (s *snapshot) remember(k uint64, d *Decision) {
	if !d.Blocked || d.re != nil || d.at < 0 || d.at > 0xff {
		return
	}
	list := 0
	if d.rules != s.custom {
		for i, lr := range s.lists {
			if lr == d.rules {
				list = i + 1
				break
			}
		}
		if list == 0 {
			return // not this snapshot's list: nothing to name it by
		}
	}
	slot := &s.memo[k>>(64-memoBits)]
	slot.key.Store(k)
	slot.val.Store(memoValid | uint64(d.flags&0x7f)<<memoFlagsShift | uint64(d.at)<<memoAtShift |
		uint64(list)<<memoListShift | uint64(uint32(k)))
}

// DecideKeyed is DecideTo for a question whose key is key: a 64-bit hash
// of the question, equal for equal questions and seeded per process (the
// query path passes the cache's, which it has computed already). A
// blocked decision is remembered for these rules, and the same question
// from a client of the same groups is then decided from the memory,
// without a look at the rules: the same decision, counted the same.
func (r Rules) DecideKeyed(d *Decision, client netip.Addr, clientNames []string, qname []byte, key uint64) {
	s := r.s
	if s == nil {
		*d = Decision{}
		return
	}
	var union listBits
	g, lists := s.groupsOf(client, clientNames, &union)
	k := memoKey(key, g)
	if s.recall(k, g, d) {
		return
	}
	s.decideFor(d, g, lists, qname)
	s.remember(k, d)
}
