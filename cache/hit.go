package cache

import (
	"github.com/nxdnsd/nxdnsd/wire/dnsmsg"

	"encoding/binary"
	"time"
)

// Hit is an entry Get found. It stays valid, and keeps its answer, after
// the entry is replaced or evicted: entries never change once stored.
// The zero Hit is Get's for a Miss.
type Hit struct {
	c  *Cache
	h  uint64
	it item
}

// Rcode is the cached answer's rcode; SERVFAIL for a remembered failure.
func (h Hit) Rcode() int { return int(h.it.rcode) }

// Lifetime is the entry's lifetime as it was stored: the answer's TTL
// after the rules of Put, or FailureTTL for a remembered failure.
func (h Hit) Lifetime() time.Duration { return time.Duration(h.it.life) * time.Second }

// Remaining is how much of the entry's lifetime is left at now; 0 once
// it has expired (a stale entry).
func (h Hit) Remaining(now time.Time) time.Duration {
	expiry := h.it.stored + int64(h.it.life)*int64(time.Second)
	return time.Duration(max(expiry-now.UnixNano(), 0))
}

// PrefetchDue reports whether a hit at now should refresh the entry in
// the background (spec section 10): a fresh answer with a lifetime of at
// least 10 s, in the last 10 % of it.
func (h Hit) PrefetchDue(now time.Time) bool {
	if h.it.failure || h.it.life < prefetchMinLife {
		return false
	}
	left := h.Remaining(now)
	return left > 0 && left <= h.Lifetime()/10
}

// prefetchMinLife is the shortest lifetime, in seconds, that is worth a
// prefetch: the last 10 % of less is under a second.
const prefetchMinLife = 10

// ClaimRefresh claims the entry for one background refresh and reports
// whether this caller got the claim: at most one caller does, for each
// entry. The refresh ends the claim by storing a new answer with Put (a
// new entry, unclaimed) or, when it got no answer Put stored, by Release.
// It reports false when the entry is no longer the key's.
func (h Hit) ClaimRefresh() bool {
	if h.c == nil {
		return false
	}
	return h.c.shard(h.h).setClaim(h.h, &h.it, true)
}

// Release ends a claim that ClaimRefresh gave, after a refresh that did
// not store an answer, so that a later hit may try again.
func (h Hit) Release() {
	if h.c != nil {
		h.c.shard(h.h).setClaim(h.h, &h.it, false)
	}
}

// setClaim sets the claim of it, when it is still h's entry, to claimed,
// and reports whether the claim changed.
func (s *shard) setClaim(h uint64, it *item, claimed bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.current(h, it)
	if cur == nil || cur.claimed == claimed {
		return false
	}
	cur.claimed = claimed
	return true
}

// current is the stored item that it is a copy of, while it is still
// h's entry, else nil. The caller holds s.mu.
func (s *shard) current(h uint64, it *item) *item {
	i, ok := s.index[h]
	if !ok {
		return nil
	}
	cur := &s.items[i].it
	if cur.stored != it.stored || cur.key != it.key || cur.failure != it.failure || !sameData(cur.data, it.data) {
		return nil
	}
	return cur
}

// NamesNothing reports whether MarkNamesNothing noted, for the rule set
// whose serial is serial, that no rule of it can name the entry's name:
// the blocking step's decision is made without a lookup (query/block.go).
// Serial 0 is no rule set: false.
func (h Hit) NamesNothing(serial uint32) bool {
	return serial != 0 && h.it.unnamed == serial
}

// MarkNamesNothing notes on the entry that no rule of the rule set whose
// serial is serial can name its name, for the hits that follow it. The
// note is the blocking step's, not the answer's: the entry's bytes stay
// as stored, and a later rule set (another serial) ignores it. It takes
// the shard's lock, once an entry for each rule set.
func (h Hit) MarkNamesNothing(serial uint32) {
	if h.c == nil || serial == 0 || h.it.unnamed == serial {
		return
	}
	h.note(func(it *item) { it.unnamed = serial })
}

// note changes the entry h found with set, under its shard's lock,
// unless another entry has replaced it since.
func (h Hit) note(set func(*item)) {
	sh := h.c.shard(h.h)
	sh.mu.Lock()
	if cur := sh.current(h.h, &h.it); cur != nil {
		set(cur)
	}
	sh.mu.Unlock()
}

// Public reports whether MarkPublic noted that the entry's answer holds
// no private address, so that rebinding protection need not look at its
// bytes again (query/rebind.go).
func (h Hit) Public() bool { return h.it.public }

// MarkPublic notes on the entry that its answer holds no private
// address, for the hits that follow it. The note is about the stored
// bytes, which never change: a refresh stores a new entry without it. It
// takes the shard's lock, once an entry.
func (h Hit) MarkPublic() {
	if h.c == nil || h.it.public {
		return
	}
	h.note(func(it *item) { it.public = true })
}

// markHot notes on the entry that its counters were full in the sketch's
// period mark (CountHit), once a period.
func (h *Hit) markHot(mark uint8) {
	h.note(func(it *item) { it.hot = mark })
	h.it.hot = mark
}

// sameData reports whether a and b are the same stored bytes.
func sameData(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// AppendAnswer appends the cached answer for one client to dst and
// returns the extended slice; it does not allocate when dst has room for
// Len more bytes. The answer carries the client's id and its question, the
// bytes from the end of the header to the end of the question section,
// written over the stored one when it is the same question in other
// letter case (else the stored spelling stays). Every TTL is lowered by
// the whole seconds since the answer was stored, to 0 at least; when
// staleTTL > 0 (a stale answer, RFC 8767) every TTL is staleTTL instead.
// The header's flags and rcode are as stored; there is no OPT record: the
// caller adds the client's. A remembered failure appends nothing.
func (h Hit) AppendAnswer(dst []byte, id uint16, question []byte, now time.Time, staleTTL uint32) []byte {
	if h.it.data == nil {
		return dst
	}
	start := len(dst)
	dst = append(dst, h.it.data...)
	out := dst[start:]
	binary.BigEndian.PutUint16(out, id)
	qend := int(h.it.qend)
	if stored := out[headerLen:qend]; len(question) == len(stored) &&
		string(question[len(question)-4:]) == string(stored[len(stored)-4:]) &&
		dnsmsg.EqualFoldASCII(question[:len(question)-4], stored[:len(stored)-4]) {
		copy(stored, question)
	}
	age := uint32(min(max(now.UnixNano()-h.it.stored, 0)/int64(time.Second), maxTTL))
	ttlOffsets(out, qend, func(off int) {
		ttl := staleTTL
		if ttl == 0 {
			ttl = binary.BigEndian.Uint32(out[off:])
			ttl -= min(ttl, age)
		}
		binary.BigEndian.PutUint32(out[off:], ttl)
	})
	return dst
}
