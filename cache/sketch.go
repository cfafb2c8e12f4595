package cache

import "sync/atomic"

// sketch is a count-min sketch of how often each key hash was asked for,
// in 4-bit counters that halve every resetAt additions so that old
// popularity fades (TinyLFU, Einziger et al.). As in Caffeine's, the four
// counters of a hash lie in one 64-byte block: one cache line per lookup.
//
// Counters are updated with atomic operations and no lock; a lost update
// under contention only makes an estimate a little low. A counter at 15
// is not written again, so the names asked most cost their lookups only
// loads.
//
// In front of the counters stands a doorkeeper (as in TinyLFU's paper and
// Ristretto): a Bloom filter that takes a hash's first lookup of the
// period, so that only hashes asked again reach the counters. A flood of
// names asked once then leaves the counters alone, and a name seen once
// estimates 1, not 1 plus what the flood put into its counters: without
// it, with a million one-off names through a full 16 MiB cache, 65 % of
// them estimated 2 or 3 and each cost the admission a sampling of
// victims (a dozen cache misses), where 1 turns them away at once. It is
// cleared at each halving.
type sketch struct {
	table     []atomic.Uint64 // blocks of 8 words of 16 counters each
	blockMask uint64          // the number of blocks - 1
	door      []atomic.Uint64 // the doorkeeper's bits, two per hash in one word
	doorMask  uint64          // len(door) - 1
	additions atomic.Int64    // counter increments since the last halving
	resetAt   int64
	resetting atomic.Bool
	period    atomic.Uint32 // halvings so far
}

// periodMark is the current period as an entry notes it (item.hot): 1 to
// 255, never 0 (no note). It wraps: a note 255 halvings old passes for
// current, and the entry's lookups then count nothing until the next
// halving, which an estimate that is a little low survives.
func (s *sketch) periodMark() uint8 { return uint8(s.period.Load()%255) + 1 }

const (
	// sketchBytesPer is how many bytes of MaxBytes buy one 8-byte word of
	// 16 counters: a sketch of MaxBytes/64, some 9 counters for each of
	// the ~300-byte entries a cache typically holds (Caffeine gives 16;
	// TestFloodKeepsHotNames passes with half as many).
	sketchBytesPer = 512
	// resetPerWord sets the halving period, in additions per word: about
	// 10 for each ~300-byte entry the cache may hold, the period of
	// TinyLFU's paper and of Caffeine.
	resetPerWord = 16
)

func (s *sketch) init(maxBytes int) {
	words := 8
	for words < maxBytes/sketchBytesPer {
		words *= 2
	}
	s.table = make([]atomic.Uint64, words)
	s.blockMask = uint64(words/8 - 1)
	s.resetAt = int64(words * resetPerWord)
	// Eight bits for each of a period's additions, two set by each: about
	// one in twenty hashes not seen in the period passes for seen.
	s.door = make([]atomic.Uint64, words*doorWordsPer)
	s.doorMask = uint64(len(s.door) - 1)
}

// doorWordsPer is the doorkeeper's 64-bit words for each word of counters:
// with resetPerWord additions a period, 8 bits for each.
const doorWordsPer = resetPerWord * 8 / 64

// doorBits is where h's two doorkeeper bits lie: their word and mask. The
// bits come from another mix of h than the counters' block and slots.
func (s *sketch) doorBits(h uint64) (word uint64, mask uint64) {
	d := h * 0xC2B2AE3D27D4EB4F
	return d >> 32 & s.doorMask, 1<<(d&63) | 1<<(d>>6&63)
}

// admitted reports whether h has been seen in this period, and marks it
// seen.
func (s *sketch) admitted(h uint64) bool {
	word, mask := s.doorBits(h)
	w := &s.door[word]
	if w.Load()&mask == mask {
		return true
	}
	w.Or(mask)
	return false
}

// seen reports whether h's doorkeeper bits are set.
func (s *sketch) seen(h uint64) bool {
	word, mask := s.doorBits(h)
	return s.door[word].Load()&mask == mask
}

// slot is where the i-th counter of h lies: its word and its shift within.
func (s *sketch) slot(h uint64, i int) (word uint64, shift uint64) {
	block := (h & s.blockMask) << 3
	// The counter choice takes other bits than the block's: the top
	// ones, after a multiply that spreads them.
	c := h * 0x9E3779B97F4A7C15
	return block + uint64(i)<<1 + c>>(32+i)&1, c >> (40 + 4*i) & 15 << 2
}

// increment counts one lookup of h: conservative update (only the
// counters at the minimum grow), which makes the estimates tighter. It
// reports whether h's counters were full already: the lookup counted
// nothing.
func (s *sketch) increment(h uint64) (full bool) {
	if !s.admitted(h) {
		// The period's first lookup of h: the doorkeeper's alone.
		if s.additions.Add(1) >= s.resetAt {
			s.reset()
		}
		return false
	}
	var words [4]uint64
	var shifts [4]uint64
	least := uint64(15)
	for i := range 4 {
		words[i], shifts[i] = s.slot(h, i)
		least = min(least, s.table[words[i]].Load()>>shifts[i]&15)
	}
	if least == 15 {
		return true
	}
	for i := range 4 {
		w := &s.table[words[i]]
		for {
			old := w.Load()
			if old>>shifts[i]&15 != least || w.CompareAndSwap(old, old+1<<shifts[i]) {
				break
			}
		}
	}
	if s.additions.Add(1) >= s.resetAt {
		s.reset()
	}
	return false
}

// frequency estimates how often h was asked for, 0 to 15: its counters'
// least, and one for the doorkeeper's mark.
func (s *sketch) frequency(h uint64) uint8 {
	least := uint64(15)
	for i := range 4 {
		w, shift := s.slot(h, i)
		least = min(least, s.table[w].Load()>>shift&15)
	}
	if s.seen(h) {
		least = min(least+1, 15)
	}
	return uint8(least)
}

// reset halves every counter and clears the doorkeeper; the lookup that
// finds the period over pays for it (some 2,048 words of counters and
// 4,096 of doorkeeper per MiB of MaxBytes: a few microseconds), one at a
// time.
func (s *sketch) reset() {
	if !s.resetting.CompareAndSwap(false, true) {
		return
	}
	for i := range s.table {
		w := &s.table[i]
		for {
			old := w.Load()
			if w.CompareAndSwap(old, old>>1&0x7777777777777777) {
				break
			}
		}
	}
	for i := range s.door {
		s.door[i].Store(0)
	}
	s.additions.Add(-s.resetAt / 2)
	s.period.Add(1)
	s.resetting.Store(false)
}
