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

const prime1 = 0xa0761d6478bd642f // wyhash's secret: odd, half its bits set

// mum multiplies to 128 bits and folds the halves: every bit of a and b
// reaches most bits of the result, the top bits (which place a key)
// included. One multiplication: cheaper than a finaliser per label.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// A label is hashed in its wire form, the length byte and then the label,
// lower-cased (names match case-insensitively), in words of eight bytes
// (little-endian, the last one padded with zeros), each carried into the
// hash by one mum: a label of up to seven bytes, as most are, is one load
// and one multiplication. The length byte in front makes the bytes of a
// name decode one way only ("ab" and "a.b" differ, and so do "ab" and
// "ab\x00").

// wordMask keeps the first k bytes of a little-endian word, 1 <= k <= 8.
func wordMask(k int) uint64 { return ^uint64(0) >> (64 - 8*k) }

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
// rule.Parse gives it: the hash of its wire form, as labels.hash computes
// it from a query.
func nameHash(name []byte) uint64 {
	h := seed
	for end := len(name); end > 0; {
		start := end - 1
		for start >= 0 && name[start] != '.' {
			start--
		}
		label := name[start+1 : end]
		w, shift := uint64(len(label)), 8
		for _, c := range label {
			if shift == 64 {
				h = mum(h^lower8(w), prime1)
				w, shift = 0, 0
			}
			w |= uint64(c) << shift
			shift += 8
		}
		h = mum(h^lower8(w), prime1)
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
	last := len(wire) - 8 // the last offset a word can be loaded from
	for j := len(into) - 1; j >= 0; j-- {
		o := int(ls.off[j])
		k := int(wire[o]) + 1 // the label's bytes in wire form
		for ; k > 8; k -= 8 {
			// The root label's byte follows the label: o+8 is in wire.
			h = mum(h^lower8(binary.LittleEndian.Uint64(wire[o:])), prime1)
			o += 8
		}
		var w uint64
		switch {
		case o <= last:
			w = binary.LittleEndian.Uint64(wire[o:])
		case last >= 0: // near the end: the name's last eight bytes, shifted
			w = binary.LittleEndian.Uint64(wire[last:]) >> (8 * (o - last))
		default: // a name of fewer than eight bytes
			for i, c := range wire[o:] {
				w |= uint64(c) << (8 * i)
			}
		}
		h = mum(h^lower8(w&wordMask(k)), prime1)
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
