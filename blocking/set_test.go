package blocking

import (
	"math/rand/v2"
	"testing"
)

// The table finds every key it was built from, with its flags merged, and
// no other, whatever the number of keys and however they cluster: the
// spreading in place must put every key where a lookup from its home
// reaches it. Mutation check: stopping a lookup at the first key that is
// not the one looked for (instead of the first greater one) fails it.
func TestSetFindsItsKeys(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(27, 1))
	for _, n := range []int{0, 1, 2, 3, 5, 64, 1000, 100000} {
		for _, hint := range []int{0, n, n / 2} {
			b := newBuilder(false, hint)
			want := map[uint64]uint64{}
			for range n {
				h := r.Uint64() &^ flagMask
				if n < 100 && r.IntN(4) == 0 {
					h &^= 1<<63 | 1<<62 // clustered at the start
				}
				f := uint64(1) << r.IntN(flagBits)
				b.keys = append(b.keys, h|f)
				want[h] |= f
				if r.IntN(8) == 0 { // the same hash again, with another flag
					g := uint64(1) << r.IntN(flagBits)
					b.keys = append(b.keys, h|g)
					want[h] |= g
				}
			}
			s := b.finish()
			if s.rules != len(want) {
				t.Errorf("n=%d hint=%d: %d rules, want %d", n, hint, s.rules, len(want))
			}
			if last := s.slots[len(s.slots)-1]; last != 0 {
				t.Errorf("n=%d: the last slot holds %x: lookups would run off the end", n, last)
			}
			for h, f := range want {
				if got := s.find(h | 0x7); uint64(got) != f {
					t.Fatalf("n=%d hint=%d: find(%x) = %b, want %b", n, hint, h, got, f)
				}
			}
			for range 1000 {
				h := r.Uint64() &^ flagMask
				if _, ok := want[h]; !ok && s.find(h) != 0 {
					t.Fatalf("n=%d: find(%x) found a key never added", n, h)
				}
			}
		}
	}
}

// A name hashes the same from a rule's presentation form and from a
// query's wire form, whatever its case.
func TestHashWireAndText(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"a", "example", "ads.example", "A-Very-Long-Label-Of-More-Than-Sixteen.example.co.uk", "x.y.z.w.v.u", "12345678.abcdefgh"} {
		w := wire(t, name+".")
		var ls labels
		var hs [shortLabels]uint64
		if err := ls.split(w, hs[:]); err != nil {
			t.Fatal(err)
		}
		lower := []byte(name)
		for i, c := range lower {
			if c >= 'A' && c <= 'Z' {
				lower[i] = c + 'a' - 'A'
			}
		}
		if got := nameHash(lower); got != hs[0] {
			t.Errorf("%s: nameHash %x, wire %x", name, got, hs[0])
		}
	}
	if nameHash([]byte("ab")) == nameHash([]byte("ab.")) || nameHash([]byte("a.b")) == nameHash([]byte("ab")) {
		t.Error("label boundaries do not change the hash")
	}
}

// The filter in front of the table never rejects an entry it was built
// from, the name itself for a key with an exact flag, the names below it
// for a key with a below flag, and lets through few of the others: those
// it rejects cost no table lookup, so a filter that says "maybe" too
// often is slow, and one that rejects a rule unblocks its names.
// Mutation checks: adding the below entries without the tweak fails the
// first checks, a filter of 2 bits an entry the rates.
func TestFilterHoldsItsKeys(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(27, 2))
	const n = 200_000
	b := newBuilder(false, n)
	for range n {
		b.keys = append(b.keys, r.Uint64()&^flagMask|uint64(1)<<r.IntN(flagBits))
	}
	s := b.finish()
	var exactOnly, belowPassed int
	for _, k := range s.slots {
		if k == 0 {
			continue
		}
		h := k &^ flagMask
		if k&(blockExact|allowExact) != 0 && !s.mayHold(h) {
			t.Fatalf("key %x: its exact entry is rejected", k)
		}
		if k&(blockBelow|allowBelow) != 0 && !s.mayHold(h^belowTweak) {
			t.Fatalf("key %x: its below entry is rejected", k)
		}
		if k&(blockBelow|allowBelow) == 0 {
			exactOnly++
			if s.mayHold(h ^ belowTweak) {
				belowPassed++
			}
		}
	}
	passed := 0
	const absent = 100_000
	for range absent {
		if s.mayHold(r.Uint64() &^ flagMask) {
			passed++
		}
	}
	// About 3.5 % with 8 bits an entry; 6 % leaves room for the variance
	// of a blocked filter.
	if rate := float64(passed) / absent; rate > 0.06 {
		t.Errorf("%.1f %% of hashes never added pass the filter, want about 3.5 %%", 100*rate)
	}
	if rate := float64(belowPassed) / float64(exactOnly); rate > 0.06 {
		t.Errorf("%.1f %% of the below entries of exact-only keys pass the filter, want about 3.5 %%", 100*rate)
	}
}
