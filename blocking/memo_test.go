package blocking

import (
	"fmt"
	"hash/maphash"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
)

// keyOf is a question's key as the query path's cache gives it: a seeded
// hash of its name, in lower case.
func keyOf(seed maphash.Seed, name string) uint64 {
	return maphash.String(seed, strings.ToLower(name))
}

// A decision from the memory is the decision the rules give: blocked by
// the same list and rule, in the same groups, counted the same; a client
// of other groups asking the same question is decided for its own
// groups, whatever the memory holds; what is not blocked is not kept.
func TestDecideKeyedIsDecideTo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	kids := writeList(t, dir, "kids.txt", "games.example", "||arcade.example^", `/^ad[0-9]+\./`)
	ads := writeList(t, dir, "ads.txt", "ads.example", "*.track.example", "@@||ok.ads.example^", "||ads.example^")
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf(`
[blocking]
block = ["||custom.example^"]
[[blocking.lists]]
name = "kids"
source = %q
[[blocking.lists]]
name = "ads"
source = %q
[[blocking.groups]]
name = "kids"
clients = ["127.0.0.2", "tablet"]
lists = ["kids", "ads"]
[[blocking.groups]]
name = "default"
lists = ["ads"]
`, kids, ads))})
	e := m.Engine()
	seed := maphash.MakeSeed()
	type asker struct {
		addr  netip.Addr
		names []string
	}
	askers := []asker{{client1, nil}, {client2, nil}, {mustAddr("127.0.0.9"), []string{"Tablet."}}}
	names := []string{
		"games.example.", "www.arcade.example.", "ad7.arcade.example.", "ad7.x.example.",
		"ads.example.", "deep.ads.example.", "ok.ads.example.", "a.track.example.", "track.example.",
		"www.custom.example.", "GAMES.Example.", "nothing.example.",
	}
	// Twice over: the first round decides and remembers, the second
	// recalls (and a client of the other groups meets the first's
	// memory in between).
	for round := range 2 {
		for _, name := range names {
			for _, a := range askers {
				qname := wire(t, name)
				rules := e.Rules()
				var want, got Decision
				rules.DecideTo(&want, a.addr, a.names, qname)
				lr := want.rules
				before := uint64(0)
				if lr != nil {
					before = lr.blocked.Load()
				}
				rules.DecideKeyed(&got, a.addr, a.names, qname, keyOf(seed, name))
				if got.Blocked != want.Blocked || got.Allowed != want.Allowed || got.List != want.List ||
					got.Rule(qname) != want.Rule(qname) || !slices.Equal(got.GroupNames(), want.GroupNames()) {
					t.Errorf("round %d, %s from %v %v: DecideKeyed %+v (rule %q, groups %v); DecideTo %+v (rule %q, groups %v)",
						round, name, a.addr, a.names, got, got.Rule(qname), got.GroupNames(), want, want.Rule(qname), want.GroupNames())
				}
				if want.Blocked {
					if n := lr.blocked.Load() - before; n != 1 {
						t.Errorf("round %d, %s from %v: DecideKeyed counted %d blocked, want 1", round, name, a.addr, n)
					}
				}
			}
		}
	}

	// What the memory holds after the rounds: every blocked decision by a
	// hashed rule, nothing else.
	s := e.Rules().s
	for _, name := range names {
		for _, a := range askers {
			var want, got Decision
			s.decideWire(wire(t, name), listsOf(s, a.addr, a.names), &want)
			var union listBits
			g, _ := s.groupsOf(a.addr, a.names, &union)
			held := s.recall(memoKey(keyOf(seed, name), g), g, &got)
			if wantHeld := want.Blocked && want.re == nil; held != wantHeld {
				t.Errorf("%s from %v: in memory %v, want %v (decision %+v)", name, a.addr, held, wantHeld, want)
			}
		}
	}
}

// listsOf is the union of the lists of a's groups in s.
func listsOf(s *snapshot, a netip.Addr, names []string) *listBits {
	union := new(listBits)
	_, lists := s.groupsOf(a, names, union)
	return lists
}

// A new rule set starts with an empty memory: a name unblocked by a
// custom allow rule is let through at once, though its blocked decision
// was remembered under the same key a moment before.
func TestDecideKeyedForgetsWithTheRules(t *testing.T) {
	t.Parallel()
	list := writeList(t, t.TempDir(), "ads.txt", "ads.example")
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf("[[blocking.lists]]\nname = \"ads\"\nsource = %q\n", list))})
	e := m.Engine()
	qname, key := wire(t, "ads.example."), keyOf(maphash.MakeSeed(), "ads.example.")
	var d Decision
	for range 2 {
		if e.Rules().DecideKeyed(&d, client1, nil, qname, key); !d.Blocked {
			t.Fatalf("ads.example.: %+v, want blocked", d)
		}
	}
	if _, err := m.AddRule(APIRule{Kind: "allow", Rule: "ads.example"}); err != nil {
		t.Fatal(err)
	}
	if e.Rules().DecideKeyed(&d, client1, nil, qname, key); d.Blocked || !d.Allowed {
		t.Errorf("ads.example. after an allow rule: %+v, want allowed", d)
	}
}

// A slot half rewritten — one decision's key beside another's word, as a
// reader between a writer's two stores sees it — is no decision.
func TestRecallRefusesATornSlot(t *testing.T) {
	t.Parallel()
	list := writeList(t, t.TempDir(), "ads.txt", "ads.example", "other.example")
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf("[[blocking.lists]]\nname = \"ads\"\nsource = %q\n", list))})
	s := m.Engine().Rules().s
	var d Decision
	s.decideWire(wire(t, "ads.example."), &s.groups[0].lists, &d)
	if !d.Blocked {
		t.Fatalf("ads.example.: %+v, want blocked", d)
	}
	// Two keys of one slot, with different low words.
	k1 := uint64(0x5a5)<<(64-memoBits) | 0x1111
	k2 := uint64(0x5a5)<<(64-memoBits) | 0x2222
	s.remember(k1, &d)
	var got Decision
	if !s.recall(k1, 1, &got) || !got.Blocked || got.List != "ads" {
		t.Fatalf("recall of what was remembered: %+v", got)
	}
	slot := &s.memo[k1>>(64-memoBits)]
	slot.key.Store(k2) // the next writer's first store, before its second
	if s.recall(k2, 1, &got) {
		t.Errorf("k2 recalled from k1's word: %+v", got)
	}
	if s.recall(k1, 1, &got) {
		t.Errorf("k1 recalled under k2's key: %+v", got)
	}
}

// Readers and writers of one memory at once (-race): every decision is
// the rules' own.
func TestDecideKeyedConcurrently(t *testing.T) {
	t.Parallel()
	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprintf("b%d.example", i))
	}
	list := writeList(t, t.TempDir(), "ads.txt", lines...)
	m := startManager(t, Options{Config: blockingConfig(t, fmt.Sprintf("[[blocking.lists]]\nname = \"ads\"\nsource = %q\n", list))})
	rules := m.Engine().Rules()
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				n := (i*7 + w) % 400 // half blocked, half not
				name := fmt.Sprintf("b%d.example.", n)
				var d Decision
				rules.DecideKeyed(&d, client1, nil, wire(t, name), uint64(n)) // keys of one slot: every store overwrites another
				if d.Blocked != (n < 200) {
					select {
					case errs <- fmt.Sprintf("%s: blocked %v", name, d.Blocked):
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
