package blocking

import (
	"encoding/binary"
	"errors"
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
	prime1 = 0xa0761d6478bd642f // wyhash's secrets: odd, half their bits set
	prime2 = 0xe7037ed1a0b428db
)

// mum multiplies to 128 bits and folds the halves: every bit of a and b
// reaches most bits of the result, the top bits (which place a key)
// included. One multiplication: cheaper than a finaliser per label.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// labelHash carries the hash h of a name's parent on through one more
// label, buf[start:start+n], lower-casing ASCII as it goes (names match
// case-insensitively). It reads the label eight bytes at a time; a tail
// is read with one load too when buf has eight bytes from it on.
func labelHash(h uint64, buf []byte, start, n int) uint64 {
	i, end := start, start+n
	for ; end-i > 8; i += 8 {
		h = mum(h^lower8(binary.LittleEndian.Uint64(buf[i:])), prime1)
	}
	// The last one to eight bytes, with the label's length (so that
	// "ab" and "ab\x00" differ) in the multiplier.
	var w uint64
	if r := end - i; len(buf)-i >= 8 {
		w = binary.LittleEndian.Uint64(buf[i:]) & (1<<(8*r) - 1)
	} else {
		for j, c := range buf[i:end] {
			w |= uint64(c) << (8 * j)
		}
	}
	return mum(h^lower8(w), prime2^uint64(n)<<1)
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

// nameHash hashes a name in presentation form without its final dot, as
// rule.Parse gives it.
func nameHash(name []byte) uint64 {
	h := seed
	for end := len(name); end > 0; {
		start := end - 1
		for start >= 0 && name[start] != '.' {
			start--
		}
		h = labelHash(h, name, start+1, end-start-1)
		end = start
	}
	return h
}

// maxLabels is the most labels a name of 255 wire bytes has.
const maxLabels = 127

// shortLabels is the most labels of a name hashed on the query path's
// own stack; the rare longer name is hashed in an array of maxLabels,
// which would otherwise be zeroed for every query.
const shortLabels = 16

// labels is a query name split once: the offsets of its labels in the
// wire name and the hash of the name from each label on.
type labels struct {
	n   int
	off [maxLabels]uint8 // off[i]: the length byte of label i in the wire name
}

// split reads a wire-format name (uncompressed, as a question carries it)
// and hashes every suffix into into, the caller's array (on its stack;
// kept in labels it would go to the heap): into[i] is the hash of labels
// i..n-1. It reports errMalformed for a malformed name (a
// pointer, a label over 63 bytes, no terminating root label, or more
// than 255 bytes) and errLong for a name of more labels than into holds.
func (ls *labels) split(wire []byte, into []uint64) error {
	if err := ls.offsets(wire); err != nil {
		return err
	}
	if ls.n > len(into) {
		return errLong
	}
	ls.hash(wire, into[:ls.n])
	return nil
}

var (
	errMalformed = errors.New("malformed name")
	errLong      = errors.New("more labels than the stack array")
)

func (ls *labels) offsets(wire []byte) error {
	ls.n = 0
	i := 0
	for {
		if i >= len(wire) || i > 254 {
			return errMalformed
		}
		l := int(wire[i])
		if l == 0 {
			return nil
		}
		if l > 63 || i+1+l >= len(wire) || ls.n == maxLabels {
			return errMalformed
		}
		ls.off[ls.n] = uint8(i)
		ls.n++
		i += 1 + l
	}
}

func (ls *labels) hash(wire []byte, into []uint64) {
	h := seed
	for j := len(into) - 1; j >= 0; j-- {
		o := int(ls.off[j])
		h = labelHash(h, wire, o+1, int(wire[o]))
		into[j] = h
	}
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
