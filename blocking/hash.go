package blocking

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
)

// The rule set stores no names, only 60-bit hashes of them (set.go). A
// name and every suffix of it are hashed in one pass over its labels,
// from the last label to the first: the hash of "b.c" is the hash of "c"
// carried on through "b", so a five-label name costs five label hashes,
// whatever the number of lists or rules.

// seed makes the hashes unpredictable from outside the process, so that
// no one can craft a name whose hash collides with a rule's (which would
// block it). Rule sets hold no hash across restarts: lists are stored as
// text and hashed again at start.
var seed = rand.Uint64() | 1

const (
	prime1 = 0x9e3779b185ebca87
	prime2 = 0xc2b2ae3d27d4eb4f
)

// labelHash carries the hash h of a name's parent on through one more
// label, lower-casing ASCII as it goes (names match case-insensitively).
// It reads the label eight bytes at a time.
func labelHash(h uint64, label []byte) uint64 {
	h ^= uint64(len(label)) * prime2
	for len(label) >= 8 {
		w := lower8(binary.LittleEndian.Uint64(label))
		h = bits.RotateLeft64(h^w*prime1, 31) * prime2
		label = label[8:]
	}
	if len(label) > 0 {
		var w uint64
		for i, c := range label {
			w |= uint64(c) << (8 * i)
		}
		h = bits.RotateLeft64(h^lower8(w)*prime1, 31) * prime2
	}
	return fmix(h)
}

// lower8 lower-cases the ASCII letters among eight bytes at once; other
// bytes (non-ASCII ones included) are left alone.
func lower8(w uint64) uint64 {
	const (
		ones = 0x0101010101010101
		high = 0x8080808080808080
	)
	seven := w &^ high               // each byte's low seven bits
	geA := seven + (0x80-'A')*ones   // high bit set where the byte >= 'A'
	gtZ := seven + (0x80-'Z'-1)*ones // high bit set where the byte > 'Z'
	upper := geA &^ gtZ &^ w & high  // >= 'A', <= 'Z' and ASCII
	return w | upper>>2              // 0x80 >> 2 is 0x20, 'a' - 'A'
}

// fmix is MurmurHash3's finaliser: every input bit reaches the top bits,
// which pick the bucket.
func fmix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// nameHash hashes a name in presentation form without its final dot, as
// rule.Parse gives it.
func nameHash(name []byte) uint64 {
	h := seed
	for end := len(name); end > 0; {
		start := end - 1
		for start >= 0 && name[start] != '.' {
			start--
		}
		h = labelHash(h, name[start+1:end])
		end = start
	}
	return h
}

// maxLabels is the most labels a name of 255 wire bytes has.
const maxLabels = 127

// labels is a query name split once: the offsets of its labels in the
// wire name and the hash of the name from each label on.
type labels struct {
	n      int
	off    [maxLabels]uint8  // off[i]: the length byte of label i in the wire name
	hashes [maxLabels]uint64 // hashes[i]: the hash of labels i..n-1
}

// split reads a wire-format name (uncompressed, as a question carries it)
// and hashes every suffix. It reports false for a malformed name: a
// pointer, a label over 63 bytes, no terminating root label, or more than
// 255 bytes.
func (ls *labels) split(wire []byte) bool {
	ls.n = 0
	i := 0
	for {
		if i >= len(wire) || i > 254 {
			return false
		}
		l := int(wire[i])
		if l == 0 {
			break
		}
		if l > 63 || i+1+l >= len(wire) || ls.n == maxLabels {
			return false
		}
		ls.off[ls.n] = uint8(i)
		ls.n++
		i += 1 + l
	}
	h := seed
	for j := ls.n - 1; j >= 0; j-- {
		o := int(ls.off[j])
		h = labelHash(h, wire[o+1:o+1+int(wire[o])])
		ls.hashes[j] = h
	}
	return true
}

// appendText appends the name from label i on in presentation form,
// lower-case and without the final dot, as regular expressions and rule
// texts see it. A label's dots or odd bytes are not escaped: no rule name
// holds them, so such a name matches nothing but a regexp written for it.
func (ls *labels) appendText(dst, wire []byte, i int) []byte {
	for j := i; j < ls.n; j++ {
		if j > i {
			dst = append(dst, '.')
		}
		o := int(ls.off[j])
		for _, c := range wire[o+1 : o+1+int(wire[o])] {
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
		}
	}
	return dst
}
