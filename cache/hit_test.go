package cache

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestAppendAnswer: the client's ID and spelling, TTLs lowered by the
// age, stale TTLs, the header as stored, every record as stored but for
// TTLs, no OPT.
func TestAppendAnswer(t *testing.T) {
	t.Parallel()
	c := New(testConfig())
	k := keyOf(example)
	up := example
	up.id = 4242
	orig := unpack(t, up.pack(t))
	c.Put(k, up.pack(t), t0)

	client := new(dns.Msg)
	client.SetQuestion("WWW.example.COM.", dns.TypeA)
	cq, _ := client.Pack()
	question := cq[headerLen:]

	for _, tt := range []struct {
		name     string
		age      time.Duration
		staleTTL uint32
		question []byte
		want     []uint32 // answer, authority, additional
		spelling string
	}{
		{"fresh", 0, 0, question, []uint32{300, 120, 120, 3600, 3600}, "WWW.example.COM."},
		{"aged, rounded down", 100*time.Second + 900*time.Millisecond, 0, question, []uint32{200, 20, 20, 3500, 3500}, "WWW.example.COM."},
		{"past a TTL: 0", 200 * time.Second, 0, question, []uint32{100, 0, 0, 3400, 3400}, "WWW.example.COM."},
		{"stale", 4000 * time.Second, 30, question, []uint32{30, 30, 30, 30, 30}, "WWW.example.COM."},
		{"no question: the stored spelling", 0, 0, nil, []uint32{300, 120, 120, 3600, 3600}, "www.Example.com."},
		{"another question: the stored spelling", 0, 0, otherQuestion(t), []uint32{300, 120, 120, 3600, 3600}, "www.Example.com."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := c.Get(k, t0.Add(tt.age))
			prefix := []byte("prefix")
			out := h.AppendAnswer(prefix, 0xBEEF, tt.question, t0.Add(tt.age), tt.staleTTL)
			if string(out[:len(prefix)]) != "prefix" || len(out)-len(prefix) != h.Len() {
				t.Fatalf("appended %d bytes after the prefix, Len %d", len(out)-len(prefix), h.Len())
			}
			got := unpack(t, out[len(prefix):])
			if got.Id != 0xBEEF {
				t.Errorf("ID %#x", got.Id)
			}
			if got.Question[0].Name != tt.spelling {
				t.Errorf("question %q, want %q", got.Question[0].Name, tt.spelling)
			}
			if got.IsEdns0() != nil {
				t.Error("an OPT record in the answer")
			}
			if g, w := got.MsgHdr, orig.MsgHdr; g.Response != w.Response || g.RecursionAvailable != w.RecursionAvailable ||
				g.RecursionDesired != w.RecursionDesired || g.Rcode != w.Rcode || g.Authoritative != w.Authoritative {
				t.Errorf("header %+v, stored %+v", g, w)
			}
			gotRRs := append(append(got.Answer, got.Ns...), got.Extra...)
			wantRRs := append(append(orig.Answer, orig.Ns...), orig.Extra[:len(orig.Extra)-1]...) // less the OPT
			if len(gotRRs) != len(wantRRs) {
				t.Fatalf("%d records, want %d", len(gotRRs), len(wantRRs))
			}
			for i, rr := range gotRRs {
				if rr.Header().Ttl != tt.want[i] {
					t.Errorf("record %d TTL %d, want %d", i, rr.Header().Ttl, tt.want[i])
				}
				w := dns.Copy(wantRRs[i])
				w.Header().Ttl = rr.Header().Ttl
				if !dns.IsDuplicate(rr, w) {
					t.Errorf("record %d: %v, want %v", i, rr, w)
				}
			}
		})
	}
}

func otherQuestion(t *testing.T) []byte {
	m := new(dns.Msg)
	m.SetQuestion("www.example.org.", dns.TypeA) // as long, another name
	b, _ := m.Pack()
	return b[headerLen:]
}

// TestAppendAnswerNoAlloc: with room in dst, a hit allocates nothing.
func TestAppendAnswerNoAlloc(t *testing.T) {
	c := New(testConfig())
	k := keyOf(example)
	c.Put(k, example.pack(t), t0)
	buf := make([]byte, 0, 4096)
	q := example.pack(t)[headerLen : headerLen+len("www.Example.com.")+1+4]
	allocs := testing.AllocsPerRun(100, func() {
		h, _ := c.Get(k, t0.Add(time.Second))
		buf = h.AppendAnswer(buf[:0], 1, q, t0.Add(time.Second), 0)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per hit", allocs)
	}
	if binary.BigEndian.Uint16(buf) != 1 {
		t.Fatal("nothing appended")
	}
}

// A note on an entry (the blocking step's MarkNamesNothing, rebinding
// protection's MarkPublic) stays on it for the hits that follow, and is
// not the next answer's: a Put of the key starts unnoted, and a Hit of
// the entry it replaced cannot note it. The entry's bytes stay as
// stored. MarkNamesNothing notes for its serial alone, and serial 0
// notes nothing. Mutation check: marking without the identity check of
// current fails the replaced-entry step.
func TestNotesStayOnTheEntry(t *testing.T) {
	t.Parallel()
	for _, note := range []struct {
		name   string
		mark   func(Hit)
		noted  func(Hit) bool
		before func(t *testing.T, get func() Hit) // what the note does not do
	}{
		{"names nothing", func(h Hit) { h.MarkNamesNothing(7) }, func(h Hit) bool { return h.NamesNothing(7) }, func(t *testing.T, get func() Hit) {
			get().MarkNamesNothing(0)
			if get().NamesNothing(0) {
				t.Fatal("serial 0 noted")
			}
			get().MarkNamesNothing(8)
			if get().NamesNothing(7) {
				t.Fatal("the note for 8 is one for 7")
			}
		}},
		{"public", func(h Hit) { h.MarkPublic() }, func(h Hit) bool { return h.Public() }, func(*testing.T, func() Hit) {
			Hit{}.MarkPublic() // a miss's zero Hit: nothing to note, no panic
		}},
	} {
		t.Run(note.name, func(t *testing.T) {
			t.Parallel()
			c := New(testConfig())
			k := keyOf(example)
			c.Put(k, example.pack(t), t0)
			get := func() Hit {
				t.Helper()
				hit, st := c.Get(k, t0)
				if st != Fresh {
					t.Fatalf("state %v, want fresh", st)
				}
				return hit
			}
			if note.noted(get()) {
				t.Fatal("a new entry is noted")
			}
			note.before(t, get)
			before := get().AppendAnswer(nil, 1, nil, t0, 0)
			note.mark(get())
			if !note.noted(get()) {
				t.Fatal("the note did not stay on the entry")
			}
			if after := get().AppendAnswer(nil, 1, nil, t0, 0); string(after) != string(before) {
				t.Fatal("the note changed the entry's answer")
			}
			old := get()
			c.Put(k, example.pack(t), t0.Add(time.Second))
			if note.noted(get()) {
				t.Fatal("a new answer for the key kept the old entry's note")
			}
			note.mark(old)
			if note.noted(get()) {
				t.Fatal("a Hit of a replaced entry noted the entry that replaced it")
			}
		})
	}
}

// Peek finds what Get finds and counts nothing in the frequency sketch;
// Count with its hash counts as Get does. Mutation check: Peek counting
// fails the first frequency check.
func TestPeekCountsNothing(t *testing.T) {
	t.Parallel()
	c := New(testConfig())
	k := keyOf(example)
	c.Put(k, example.pack(t), t0)
	h := c.hash(k)
	before := c.sketch.frequency(h)
	for range 3 {
		hit, st, hash := c.Peek(k, t0)
		if st != Fresh || hash != h || hit.Len() == 0 {
			t.Fatalf("Peek: state %v, hash %x (want %x)", st, hash, h)
		}
	}
	if f := c.sketch.frequency(h); f != before {
		t.Fatalf("three Peeks moved the frequency %d -> %d", before, f)
	}
	for range 3 {
		c.Count(h)
	}
	if f := c.sketch.frequency(h); f <= before {
		t.Fatalf("three Counts left the frequency at %d (was %d)", f, before)
	}
}

// CountHit counts a hit as Count does until a lookup finds the entry's
// counters full; then it notes so on the entry and the hits after it
// skip the sketch (the doorkeeper's word is not read: clearing it goes
// unnoticed), until the sketch's next halving, after which they count
// again. A miss's zero Hit counts as Count. Mutation check: a CountHit
// that always skips after the first note fails the halving step.
func TestCountHitSkipsFullCounters(t *testing.T) {
	t.Parallel()
	c := New(testConfig())
	k := keyOf(example)
	c.Put(k, example.pack(t), t0)
	h := c.hash(k)
	lookup := func() Hit {
		t.Helper()
		hit, st, hash := c.Peek(k, t0)
		if st != Fresh || hash != h {
			t.Fatalf("Peek: state %v", st)
		}
		c.CountHit(&hit, hash)
		return hit
	}
	noted := func() bool { hit, _, _ := c.Peek(k, t0); return hit.it.hot == c.sketch.periodMark() }
	for i := 0; !noted(); i++ {
		if i == 100 {
			t.Fatalf("not noted after 100 lookups (frequency %d)", c.sketch.frequency(h))
		}
		lookup()
	}
	if f := c.sketch.frequency(h); f != 15 {
		t.Fatalf("noted at frequency %d, want 15", f)
	}
	word, _ := c.sketch.doorBits(h)
	c.sketch.door[word].Store(0)
	lookup()
	if c.sketch.seen(h) {
		t.Fatal("a noted entry's lookup went through the sketch")
	}
	c.sketch.reset()
	before := c.sketch.frequency(h)
	lookup()
	lookup()
	if f := c.sketch.frequency(h); f <= before {
		t.Fatalf("after the halving: frequency %d -> %d, want the lookups counted", before, f)
	}
	var miss Hit
	before = c.sketch.frequency(12345)
	c.CountHit(&miss, 12345)
	c.CountHit(&miss, 12345)
	if f := c.sketch.frequency(12345); f <= before {
		t.Fatalf("a miss's lookups: frequency %d -> %d, want them counted", before, f)
	}
}
